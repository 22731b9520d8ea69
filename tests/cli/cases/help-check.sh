bloomkit check --help
