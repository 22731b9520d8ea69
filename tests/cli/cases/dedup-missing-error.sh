echo x | bloomkit dedup -n 10
