bloomkit merge --json u.bkf a.bkf
