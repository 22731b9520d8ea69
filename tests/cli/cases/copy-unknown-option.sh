bloomkit copy --force a:1 b:2
