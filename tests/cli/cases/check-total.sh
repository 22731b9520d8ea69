bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
seq 1 100 | bloomkit add a.bkf
seq 51 150 | bloomkit check -c a.bkf; echo "exit $?"; seq 51 150 | bloomkit check -c -v a.bkf; seq 200 210 | bloomkit check --total a.bkf
