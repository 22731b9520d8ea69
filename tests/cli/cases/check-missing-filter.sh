echo x | bloomkit check missing.bkf
