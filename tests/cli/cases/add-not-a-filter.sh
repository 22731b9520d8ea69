seq 1 100 > numbers.txt
echo key | bloomkit add numbers.txt
