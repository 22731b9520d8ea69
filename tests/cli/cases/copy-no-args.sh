bloomkit copy
