bloomkit copy --help
