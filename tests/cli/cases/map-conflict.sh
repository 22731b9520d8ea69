printf 'alpha\t1\nbeta\t2\n' > a.tsv
printf 'gamma\t3\nalpha\t4\n' > b.tsv
bloomkit build-map m.bkf a.tsv b.tsv
