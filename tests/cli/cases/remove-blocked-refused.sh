bloomkit create b.bkf -n 10 -e 0.01
echo 1 | bloomkit remove b.bkf
