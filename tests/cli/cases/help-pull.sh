bloomkit pull --help
