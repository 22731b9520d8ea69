# --window is a duration with a unit; without --window a window filter
# cannot be made, and the message says what to add.
bloomkit create a.bkf -n 100 -e 0.01 -t window; echo "exit $?"
bloomkit create a.bkf -n 100 -e 0.01 -t window --window 60; echo "exit $?"
bloomkit create a.bkf -n 100 -e 0.01 -t window --window 10y; echo "exit $?"
bloomkit create a.bkf -n 100 -e 0.01 -t window --window soon; echo "exit $?"
bloomkit create a.bkf -n 100 -e 0.01 -t window --window 0.1ms; echo "exit $?"
bloomkit create a.bkf -n 100 -e 0.01 -t window --window-by-count --window 1h; echo "exit $?"
bloomkit create a.bkf -n 100 -e 0.01 -t window --window 1.5h && echo "1.5h ok"
bloomkit create b.bkf -n 100 -e 0.01 -t window --window 250ms && echo "250ms ok"
bloomkit create c.bkf -n 100 -e 0.01 --window 500 --window-by-count -t window && echo "by count ok"
