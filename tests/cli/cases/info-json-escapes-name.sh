bloomkit create 'we"ird\name.bkf' -n 10 -e 0.01 -t classic
bloomkit info --json 'we"ird\name.bkf' | cut -c 1-30
