bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
printf "a b\0c\nd\0last" | bloomkit add -0 a.bkf
printf "a b\nc\nd\nlast\nc\\nd\n" > probe.txt
bloomkit check a.bkf probe.txt; printf "c\nd\0last\n" | bloomkit check -0 --total a.bkf
