echo x | bloomkit dedup -n 10 -e 0.01 --force
