bloomkit add --help
