#!/bin/sh
# The CTest test example_guard: the example at small sizes, once with each
# kind of key (the counting key deletes with CBF.DEL; the BF key by a
# rebuild). Every check of guard.py must pass; 77 (skipped) when
# PostgreSQL is not installed.
here=$(dirname "$0")
"$here/run.sh" --ids 20000 --queries 4000 --filter cbf || exit $?
echo
"$here/run.sh" --ids 20000 --queries 4000 --filter bf
