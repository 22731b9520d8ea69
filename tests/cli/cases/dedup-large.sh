# 200000 lines, 120000 distinct, shuffled deterministically: the output
# keeps first occurrences in order; compare with the exact answer (the one
# line missing is a false positive of the blocked filter).
awk 'BEGIN { for (i = 0; i < 200000; i++) print "https://example.com/" (i * 7919) % 120000 }' > in.txt
bloomkit dedup -n 120000 -e 1e-6 in.txt > out.txt
awk '!seen[$0]++' in.txt > exact.txt
wc -l < out.txt; wc -l < exact.txt
diff out.txt exact.txt
