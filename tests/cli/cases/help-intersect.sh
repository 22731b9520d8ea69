bloomkit intersect --help
