bloomkit cluster --help
