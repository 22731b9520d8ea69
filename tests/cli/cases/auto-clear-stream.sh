# --auto-clear: a 2,000-key filter given ten times its capacity clears
# itself instead of saturating: the keys since its last clear are all
# found, absent keys stay rare, and info shows the clears. With --rotate
# the previous generation is kept too (a counting filter: keys remove).
seq 1 20000 > stream
seq 100001 120000 > absent
tail -n 500 stream > recent
bloomkit create a.bkf -n 2000 -e 0.01 --auto-clear 0.5
bloomkit add a.bkf stream
bloomkit check -c a.bkf recent
bloomkit check -c a.bkf absent
bloomkit info a.bkf | grep -E '^(type|auto-clear/1000|rotate|clears|items):'
bloomkit create b.bkf -n 2000 -e 0.01 -t counting --auto-clear 0.4 --rotate
bloomkit add b.bkf stream
tail -n 1500 stream > recent2
bloomkit check -c b.bkf recent2
bloomkit remove b.bkf recent
bloomkit check -c b.bkf recent
bloomkit info --json b.bkf | tr ',' '\n' | grep -E '"(type|auto_clear_permille|rotate|clears)"'
