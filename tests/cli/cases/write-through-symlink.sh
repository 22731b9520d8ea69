# A filter file reached through a symbolic link: add, remove, merge and
# create --force write the file the link points to (the link stays a
# link); a link to nothing is refused and nothing is created.
bloomkit create real.bkf -n 1000 -e 0.01 -t counting
ln -s real.bkf link.bkf
printf 'a\nb\n' | bloomkit add link.bkf
test -L link.bkf && echo "link.bkf is still a link"
printf 'a\nb\nc\n' | bloomkit check real.bkf
printf 'b\n' | bloomkit remove link.bkf
printf 'a\nb\n' | bloomkit check real.bkf
bloomkit create m.bkf -n 1000 -e 0.01 -t classic
bloomkit create other.bkf -n 1000 -e 0.01 -t classic
printf 'y\n' | bloomkit add m.bkf
printf 'z\n' | bloomkit add other.bkf
ln -s m.bkf mlink.bkf
bloomkit merge mlink.bkf m.bkf other.bkf
test -L mlink.bkf && echo "mlink.bkf is still a link"
printf 'y\nz\n' | bloomkit check m.bkf
mkdir sub && ln -s ../real.bkf sub/rel.bkf
printf 'q\n' | bloomkit add sub/rel.bkf
printf 'q\n' | bloomkit check real.bkf
ln -s nothere.bkf dangling.bkf
printf 'x\n' | bloomkit add dangling.bkf -n 10 -e 0.1
echo "add: $?"
bloomkit create dangling.bkf -n 10 -e 0.1 --force
echo "create: $?"
test -e nothere.bkf || echo "nothere.bkf was not created"
