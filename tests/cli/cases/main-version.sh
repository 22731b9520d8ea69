bloomkit --version
