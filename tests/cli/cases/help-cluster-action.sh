bloomkit cluster add --help
