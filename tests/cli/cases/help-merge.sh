bloomkit merge --help
