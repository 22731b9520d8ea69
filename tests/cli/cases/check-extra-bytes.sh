bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
echo junk >> a.bkf
echo x | bloomkit check a.bkf
