# --auto-clear takes a fill ratio in (0, 1], applies to the blocked
# (default layout), classic and counting filters, and --rotate needs it.
bloomkit create a.bkf -n 100 -e 0.01 --auto-clear 0; echo "exit $?"
bloomkit create a.bkf -n 100 -e 0.01 --auto-clear 1.5; echo "exit $?"
bloomkit create a.bkf -n 100 -e 0.01 --auto-clear half; echo "exit $?"
bloomkit create a.bkf -n 100 -e 0.01 --rotate; echo "exit $?"
bloomkit create a.bkf -n 100 -e 0.01 -t cuckoo --auto-clear 0.5; echo "exit $?"
bloomkit create a.bkf -n 100 -e 0.01 --split --auto-clear 0.5; echo "exit $?"
bloomkit create a.bkf -n 100 -e 0.01 -t classic --auto-clear 1 && echo "classic ok"
