bloomkit cluster create --nodes 127.0.0.1:7000 "a{b}" -n 1000 -e 0.01
