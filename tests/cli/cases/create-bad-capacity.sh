bloomkit create a.bkf --capacity lots --error 0.01
