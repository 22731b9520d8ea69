echo x | bloomkit dedup -e 0.01
