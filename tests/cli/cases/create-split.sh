bloomkit create --type blocked --split -n 10000 -e 0.01 s.bkf
seq 1 1000 | bloomkit add s.bkf
seq 998 1002 | bloomkit check s.bkf
bloomkit info s.bkf | grep -E "^(type|hashes|split layout|items)"
