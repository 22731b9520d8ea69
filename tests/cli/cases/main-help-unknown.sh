bloomkit help frobnicate
