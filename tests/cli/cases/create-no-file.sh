bloomkit create --capacity 10 --error 0.01
