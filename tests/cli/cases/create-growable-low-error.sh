# Below the lowest rate 11-bit fingerprints give: refused, naming why.
bloomkit create --type growable -n 100 -e 0.0001 g.bkf
