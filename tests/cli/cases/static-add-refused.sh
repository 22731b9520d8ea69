printf 'a\nb\n' | bloomkit create --type static s.bkf
echo c | bloomkit add s.bkf
