#!/bin/sh
# Man pages from the programs' own --help, so that the two never disagree.
#
#   mkman.sh bloomkit PATH/TO/bloomkit VERSION > bloomkit.1
#   mkman.sh server   PATH/TO/bloomkit-server VERSION > bloomkit-server.1
#
# bloomkit's help texts are short man pages already (NAME, SYNOPSIS, ...
# headings at column 0, text indented by two): bloomkit(1) is the top-level
# text followed by every subcommand's, each subcommand a section of its own
# ("BLOOMKIT CREATE") with its headings as subsections. The subcommands are
# the words listed under COMMANDS in `bloomkit --help`, so a new one needs
# no change here. bloomkit-server's --help ("Usage: ..." and an option
# table) becomes SYNOPSIS and DESCRIPTION. Text is kept as it is laid out
# (.nf), with troff's special characters escaped.
set -eu
kind=$1
bin=$2
version=$3

# Escape for troff: backslashes, leading dots and quotes, hyphens.
escape() {
    sed -e 's/\\/\\e/g' -e 's/^\([.'"'"']\)/\\\&\1/' -e 's/-/\\-/g'
}

# One help text on stdin: headings (a line of capitals at column 0) become
# $1 (.SH or .SS) headings; the rest is preformatted. With $2 = name, the
# NAME section's line is set as "name \- summary" (whatis, apropos).
sections() {
    awk -v macro="$1" -v name="${2:-}" '
        /^[A-Z][A-Z ]*$/ {
            if (open) print ".fi"
            print macro " " $0
            open = 0
            if ($0 == "NAME" && name != "") { getline; sub(/^ +/, ""); print; getline; if ($0 != "") { print ".nf"; open = 1; print } next }
            print ".nf"; open = 1; next
        }
        { if (!open) { print ".nf"; open = 1 } print }
        END { if (open) print ".fi" }'
}

case $kind in
bloomkit)
    echo ".TH BLOOMKIT 1 \"\" \"bloomkit $version\" \"User Commands\""
    "$bin" --help | escape | sections .SH name
    commands=$("$bin" --help | awk '
        /^[A-Z][A-Z ]*$/ { in_cmds = ($0 == "COMMANDS"); next }
        in_cmds && /^  [a-z][a-z-]* / { print $1 }' | sort -u)
    for c in $commands; do
        upper=$(echo "$c" | tr 'a-z' 'A-Z')
        echo ".SH \"BLOOMKIT $upper\""
        "$bin" help "$c" | escape | sections .SS
    done
    ;;
server)
    echo ".TH BLOOMKIT\\-SERVER 1 \"\" \"bloomkit $version\" \"User Commands\""
    echo ".SH NAME"
    echo "bloomkit\\-server \\- a Redis\\-protocol server for bloomkit's filters"
    echo ".SH SYNOPSIS"
    "$bin" --help | sed -n 's/^Usage: //p' | escape
    echo ".SH DESCRIPTION"
    echo ".nf"
    "$bin" --help | sed '1,/^$/d' | escape
    echo ".fi"
    echo ".SH SEE ALSO"
    echo "bloomkit(1), redis\\-cli(1)"
    ;;
*)
    echo "mkman.sh: unknown kind '$kind' (bloomkit, server)" >&2
    exit 2
    ;;
esac
