echo 1 | bloomkit remove missing.bkf
