bloomkit remove --help
