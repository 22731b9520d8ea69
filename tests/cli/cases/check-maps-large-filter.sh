# check maps a large filter instead of reading it: one key against a
# 200 MB filter keeps the process's peak RSS far below the file's size
# (reading it whole would need all 200 MB). The RSS is the child's
# ru_maxrss, measured by Python's resource module.
bloomkit create big.bkf -n 160M -e 0.01 || exit 1
echo present | bloomkit add big.bkf || exit 1
size=$(wc -c < big.bkf)
[ "$size" -gt 190000000 ] && echo "filter is over 190 MB"
/usr/bin/python3 - <<'PY'
import resource, subprocess
out = subprocess.run(["bloomkit", "check", "big.bkf"], input=b"present\nabsent\n",
                     stdout=subprocess.PIPE).stdout
peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(out.decode(), end="")
print("peak RSS under 64 MB" if peak_mb < 64 else "peak RSS %.0f MB" % peak_mb)
PY
bloomkit info big.bkf | grep '^items'
