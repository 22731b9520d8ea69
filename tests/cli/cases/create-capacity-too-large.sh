# A number beyond 64 bits is out of range, not "not a whole number".
bloomkit create a.bkf -n 1e30 -e 0.01; echo "exit $?"
bloomkit create a.bkf -n 99999999999999999999999 -e 0.01; echo "exit $?"
bloomkit create a.bkf -n 1.5 -e 0.01; echo "exit $?"
