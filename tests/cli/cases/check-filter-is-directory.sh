mkdir d.bkf
echo x | bloomkit check d.bkf
