bloomkit info missing.bkf
