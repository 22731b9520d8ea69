bloomkit info "$SRC/tests/golden/bloom-v1.bkf" | sed "s|$SRC/||"
