seq 1 100 > numbers.txt
bloomkit info numbers.txt
