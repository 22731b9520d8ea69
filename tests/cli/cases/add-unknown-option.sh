bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
echo x | bloomkit add a.bkf --invert
