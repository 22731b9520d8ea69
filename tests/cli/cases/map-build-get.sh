printf 'alpha\t1\nbeta\t200\ngamma\t3\nbeta\t200\n\ndelta\t0\n' > pairs.tsv
bloomkit build-map m.bkf pairs.tsv
printf 'alpha\nbeta\ngamma\ndelta\n' | bloomkit get m.bkf
bloomkit info m.bkf | grep -E 'type|items:'
