bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
seq 1 10 > one.txt
seq 11 20 > two.txt
bloomkit add a.bkf one.txt - two.txt <<EOF
from-stdin
EOF
printf "1\n15\n20\nfrom-stdin\n21\nnope\n" | bloomkit check a.bkf
