: > empty.bkf
echo x | bloomkit check empty.bkf
