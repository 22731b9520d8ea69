bloomkit merge u.bkf
