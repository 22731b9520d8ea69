bloomkit check
