bloomkit push --help
