bloomkit create --help
