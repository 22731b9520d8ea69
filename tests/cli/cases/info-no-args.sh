bloomkit info
