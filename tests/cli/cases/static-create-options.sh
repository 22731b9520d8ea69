echo a > keys
bloomkit create --type static s.bkf keys --capacity 10 || echo "exit $?"
bloomkit create --type static s.bkf keys --fingerprint-bits 10 || echo "exit $?"
bloomkit create --type static s.bkf keys --error 1e-6 || echo "exit $?"
bloomkit create --type static s.bkf keys --error 0.0001 && bloomkit info s.bkf | grep -E 'type|target error|items:'
bloomkit create --type static s.bkf keys || echo "exit $?"
bloomkit create --type map m.bkf keys || echo "exit $?"
bloomkit create --type static s12.bkf keys --error 0.001 && bloomkit info s12.bkf | grep -E 'target error'
bloomkit create --type static s12b.bkf keys --fingerprint-bits 12 && cmp s12.bkf s12b.bkf && echo same
