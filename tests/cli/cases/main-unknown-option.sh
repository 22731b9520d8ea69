bloomkit --frobnicate
