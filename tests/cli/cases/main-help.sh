bloomkit --help
