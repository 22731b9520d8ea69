seq 1 100 > old
seq 101 400 > new
bloomkit create w.bkf --capacity 100 --error 0.01 --type window --window 100 --window-by-count --generations 4
bloomkit add w.bkf old
bloomkit check -c w.bkf old
bloomkit add w.bkf new
bloomkit check -c w.bkf old
bloomkit check -c w.bkf new
