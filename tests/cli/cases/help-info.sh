bloomkit info --help
