bloomkit dedup --help
