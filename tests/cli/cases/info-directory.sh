mkdir d
bloomkit info d
