bloomkit frobnicate x.bkf
