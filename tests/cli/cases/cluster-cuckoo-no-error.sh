bloomkit cluster create --nodes 127.0.0.1:7000 users -n 1000 -e 0.01 -t cuckoo
