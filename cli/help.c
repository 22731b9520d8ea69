/*
 * help.c - the --help texts, written like short man pages (NAME, SYNOPSIS,
 * DESCRIPTION, OPTIONS, EXIT STATUS, EXAMPLES). docs/CLI.md is the long
 * form of the same reference.
 */
#include <string.h> /* strcmp */

#include "cli.h"

#define SIZING_OPTIONS                                                         \
    "  -n, --capacity N     items the filter is sized for (suffixes k, M, G, T\n" \
    "                       are powers of 1000; 1e6 works too)\n"              \
    "  -e, --error P        target false-positive rate, in (0, 1)\n"           \
    "  -t, --type TYPE      blocked (default), classic, counting, deletable,\n" \
    "                       cuckoo, scalable, growable (grows, one cache line\n" \
    "                       per lookup; rates from 0.071%), window, ttl (each\n" \
    "                       key forgotten after its own TTL), or the\n"     \
    "                       counting kinds dleft, varcount, hier, hybrid,\n" \
    "                       morris (remove: all but morris; see docs/CLI.md)\n" \
    "      --seed S         64-bit hash seed, decimal or 0x-hex (filters are\n" \
    "                       only combinable with equal seeds)\n"               \
    "  family options (each only with its --type):\n"                          \
    "      --split                  blocked: the split layout, for the fastest\n" \
    "                               single-key calls (10.1 bits per key at 1%,\n" \
    "                               9.9 without; docs/HASHING.md)\n"          \
    "      --counter-bits 4|8       counting: bits per counter\n"              \
    "      --regions N              deletable: collision regions\n"            \
    "      --bucket-size 2|4|8      cuckoo: slots per bucket\n"                \
    "      --fingerprint-bits N     cuckoo: bits per fingerprint (4..32)\n"    \
    "      --max-kicks N            cuckoo: relocations before 'full'\n"       \
    "      --expansion N            scalable: growth factor of new stages\n"   \
    "      --nonscaling             scalable: refuse adds when full\n"         \
    "      --window D               window: a wall-clock span with a unit\n"   \
    "                               (250ms, 30s, 10m, 2h, 1d), or with\n"      \
    "                               --window-by-count a number of insertions\n" \
    "      --generations N          window: sub-filters in the ring\n"         \
    "      --window-by-count        window: expire by insertions, not time\n"   \
    "      --auto-clear R           blocked, classic, counting: empty the\n"    \
    "                               filter when the fraction R of its bits\n"   \
    "                               (counters) is set, e.g. 0.5: a stream\n"    \
    "                               never saturates it (seed 003)\n"           \
    "      --rotate                 with --auto-clear: keep the previous\n"     \
    "                               generation for lookups until the next\n"   \
    "                               clear (twice the memory)\n"                \
    "      --max-ttl D              ttl: the longest TTL a key may have, a\n"  \
    "                               duration (30s, 10m, 1h); a table of\n"     \
    "                               fixed size, granularity max TTL / 12;\n"  \
    "                               --generations N: N generations instead\n" \
    "                               (grow past capacity; granularity max\n"   \
    "                               TTL / (N - 1))\n"                          \
    "      --slots S                ttl table: granularity max TTL / S (1 to\n" \
    "                               64, default 12); more slots cost bits:\n" \
    "                               4 expiry bits an entry at 12, 7 at 64\n"

#define INPUT_OPTIONS                                                          \
    "  -0, --null           keys end in NUL instead of newline (find -print0)\n" \
    "  -f, --field N        the key is field N (1-based) of each line\n"      \
    "  -d, --delimiter C    field separator for --field (one byte, '\\t' is\n" \
    "                       tab; default tab)\n"                               \
    "      --skip-empty     ignore empty keys (by default the empty line is\n" \
    "                       a key like any other)\n"                           \
    "  -q, --quiet          no progress line (it is only ever shown when\n"   \
    "                       stderr is a terminal)\n"                          \
    "      --no-decompress  read gzip or zstd input as raw bytes\n"

#define KEYS_SECTION                                                           \
    "KEYS\n"                                                                   \
    "  INPUT files are read in order; none, or '-', is standard input. A key\n" \
    "  is one line without its newline (or NUL with -0); '\\r' is not\n"       \
    "  stripped. A last line without a newline is a key. Lines are at most\n"  \
    "  1048576 bytes: a longer one is an error naming file and line. Input\n" \
    "  compressed with gzip or zstd is recognised by its first bytes and\n"   \
    "  decompressed (--no-decompress: read it as it is).\n"

#define HELP_SECTION "  -h, --help           show this text\n"

static const struct {
    const char *name;
    const char *text;
} helps[] = {
{"",
"NAME\n"
"  bloomkit - build, query and combine Bloom filters from the shell\n"
"\n"
"SYNOPSIS\n"
"  bloomkit COMMAND [OPTIONS] [ARGS]\n"
"  bloomkit COMMAND --help\n"
"\n"
"COMMANDS\n"
"  create FILE --capacity N --error P [--type TYPE]   create an empty filter\n"
"  add FILE [INPUT...]          add keys (one per line) to a filter\n"
"  check FILE [INPUT...]        print the keys the filter probably holds\n"
"  dedup [INPUT...] --capacity N --error P\n"
"                               print each line the first time it is seen\n"
"  remove FILE [INPUT...]       remove keys (counting, deletable, cuckoo,\n"
"                               dleft, varcount, hier, hybrid)\n"
"  info FILE [--json]           describe a filter file\n"
"  merge OUT IN...              union of filters\n"
"  intersect OUT IN...          intersection of filters\n"
"  cluster ACTION --nodes H:P,... NAME\n"
"                               a filter sharded over a Redis Cluster running\n"
"                               bloomkit.so (create, add, check, info)\n"
"  verify FILE...               check every checksum of filter files\n"
"  copy SRC DST [--pattern P]   copy keys between servers or clusters\n"
"                               (DUMP/RESTORE)\n"
"  push FILE SERVER KEY         a static filter or map file into a server key\n"
"  pull SERVER KEY FILE         a server's static filter or map into a file\n"
"  create --type static FILE [KEYS...]\n"
"                               a static filter (binary fuse) of the keys\n"
"  create --type bumped FILE [KEYS...]\n"
"                               a static filter read with one cache line\n"
"  build-map FILE [PAIRS...]    a static map of KEY<TAB>VALUE lines\n"
"  get MAP [INPUT...]           the values of keys in a map\n"
"  diff A B                     what each side lacks (files or HOST:PORT/KEY)\n"
"  sync A B                     give each side the keys it lacks\n"
"\n"
"  --help, --version\n"
"\n"
"EXIT STATUS\n"
"  0 success; 1 check found no key (or remove left some keys); 2 error.\n"
"\n"
"  Files are written atomically: an interrupted command leaves the old\n"
"  file or the new one, never a damaged one. See 'bloomkit COMMAND --help'.\n"},

{"create",
"NAME\n"
"  bloomkit create - create an empty filter file\n"
"\n"
"SYNOPSIS\n"
"  bloomkit create FILE --capacity N --error P [--type TYPE] [OPTIONS]\n"
"  bloomkit create --type static FILE [KEYS...] [--error P | --fingerprint-bits 8|12|16]\n"
"  bloomkit create --type bumped FILE [KEYS...] [--error P | --fingerprint-bits 8|16]\n"
"\n"
"DESCRIPTION\n"
"  Sizes a filter for N items at false-positive rate P and saves it to\n"
"  FILE (atomically). An existing FILE is refused unless --force.\n"
"\n"
"  --type static builds a binary fuse filter of the keys in KEYS (none,\n"
"  or '-', is standard input): ~1.13 x log2(1/P) bits per key. Fingerprints\n"
"  of 8 bits (0.39%) by default, 12 bits (0.024%) for --error below 0.0039,\n"
"  16 bits (0.0015%) below 0.00024, or --fingerprint-bits. It cannot take\n"
"  more keys later (add answers an error): build it again from the new\n"
"  set.\n"
"\n"
"  --type bumped builds a static filter whose lookups read one cache line\n"
"  (4% of keys two at 8 bits, 10% at 16), at ~1.12 x log2(1/P) bits per\n"
"  key: fingerprints of 8 bits (0.39%) by default, 16 (0.0015%) for\n"
"  --error below 0.0039, or --fingerprint-bits 8|16.\n"
"\n"
"OPTIONS\n"
SIZING_OPTIONS
"      --force          replace FILE if it exists\n"
HELP_SECTION
"\n"
"EXIT STATUS\n"
"  0 created; 2 error.\n"
"\n"
"EXAMPLES\n"
"  bloomkit create urls.bkf --capacity 10M --error 0.001\n"
"  bloomkit create ids.bkf -n 1e6 -e 0.01 --type counting --counter-bits 8\n"},

{"add",
"NAME\n"
"  bloomkit add - add keys to a filter file\n"
"\n"
"SYNOPSIS\n"
"  bloomkit add FILE [INPUT...] [OPTIONS]\n"
"\n"
"DESCRIPTION\n"
"  Loads FILE, adds every key of the INPUTs and saves FILE atomically:\n"
"  after an error (missing input, over-long line, full filter) FILE is\n"
"  left as it was. When FILE does not exist and the sizing options are\n"
"  given, it is created first; they are ignored when FILE exists.\n"
"\n"
"  When the add takes the filter past its capacity, or its measured\n"
"  false-positive rate past 1.5 times its target, a warning on stderr\n"
"  says so, with the rate now; --strict makes that an error and FILE is\n"
"  left as it was. Concurrent adds (and removes) of one FILE wait for\n"
"  each other: each locks FILE for its whole read-modify-write.\n"
"\n"
"  With a lock-free family (blocked, classic) the keys are added by -j\n"
"  threads, each taking whole batches. The bits are identical to a\n"
"  one-thread run; the 'items' count (adds that set a new bit) depends on\n"
"  the order of the adds and may differ slightly.\n"
"\n"
"OPTIONS\n"
"  -j, --jobs N         threads (default 0: one per core)\n"
"      --strict         refuse (exit 2, FILE unchanged) an add that takes\n"
"                       the filter past its capacity or target rate\n"
"      --ttl D          ttl filters: the keys live D from now (30s, 10m,\n"
"                       1h; at most the filter's max TTL; default: it)\n"
INPUT_OPTIONS
SIZING_OPTIONS
HELP_SECTION
"\n"
KEYS_SECTION
"\n"
"EXIT STATUS\n"
"  0 added and saved; 2 error (FILE unchanged).\n"
"\n"
"EXAMPLES\n"
"  bloomkit add seen.bkf urls.txt\n"
"  cut -f2 log.tsv | bloomkit add ids.bkf -n 1M -e 0.001\n"
"  bloomkit add users.bkf --field 3 --delimiter , users.csv\n"
"  bloomkit add sessions.bkf --ttl 15m tokens.txt    (a --type ttl file)\n"},

{"check",
"NAME\n"
"  bloomkit check - print the keys a filter probably holds\n"
"\n"
"SYNOPSIS\n"
"  bloomkit check FILE [INPUT...] [OPTIONS]\n"
"\n"
"DESCRIPTION\n"
"  Prints each input line whose key the filter probably holds, in input\n"
"  order (the whole line, also with --field). With -v it prints the lines\n"
"  whose key is certainly absent instead.\n"
"\n"
"  A FILE over 16 MiB is mapped, not read: a few keys cost a few pages,\n"
"  whatever its size, and its payload checksum is not read (bloomkit info\n"
"  checks it). A time-window or TTL filter answers for the present moment.\n"
"\n"
"OPTIONS\n"
"  -v, --invert         print the keys that are certainly absent\n"
"  -c, --total          print only the number of lines that would be printed\n"
"      --count          print every line after its count estimate and a tab\n"
"                       (counting, cuckoo, dleft, varcount, hier, hybrid:\n"
"                       copies; morris: estimated copies; others: 0 or 1)\n"
INPUT_OPTIONS
HELP_SECTION
"\n"
KEYS_SECTION
"\n"
"EXIT STATUS\n"
"  As grep: 0 some line was selected (count above 0 with --count), 1 none\n"
"  was, 2 error.\n"
"\n"
"EXAMPLES\n"
"  bloomkit check blacklist.bkf emails.txt\n"
"  bloomkit check -v seen.bkf new-urls.txt > to-crawl.txt\n"},

{"dedup",
"NAME\n"
"  bloomkit dedup - print each line the first time it is seen\n"
"\n"
"SYNOPSIS\n"
"  bloomkit dedup [INPUT...] --capacity N --error P [OPTIONS]\n"
"\n"
"DESCRIPTION\n"
"  Streams the INPUT lines to standard output, keeping only the first\n"
"  occurrence of each key, in input order, in the memory of a filter\n"
"  sized for N distinct keys at rate P. A false positive drops a line\n"
"  seen for the first time (a fraction of about P of the distinct keys\n"
"  once N are in); a duplicate is never printed. When the input holds\n"
"  clearly more than N distinct keys a warning says so at the end.\n"
"\n"
"OPTIONS\n"
"      --save FILE      save the filter to FILE at the end\n"
"      --ttl D          with --type ttl: a key counts as seen for D\n"
INPUT_OPTIONS
SIZING_OPTIONS
HELP_SECTION
"\n"
KEYS_SECTION
"  With -0 the output lines end in NUL too.\n"
"\n"
"EXIT STATUS\n"
"  0 success; 2 error.\n"
"\n"
"EXAMPLES\n"
"  bloomkit dedup frontier.txt -n 100M -e 1e-4 > unique.txt\n"
"  find / -print0 | bloomkit dedup -0 -n 10M -e 1e-6 --save paths.bkf\n"},

{"remove",
"NAME\n"
"  bloomkit remove - remove keys from a filter file\n"
"\n"
"SYNOPSIS\n"
"  bloomkit remove FILE [INPUT...] [OPTIONS]\n"
"\n"
"DESCRIPTION\n"
"  Removes every key of the INPUTs from FILE and saves it atomically.\n"
"  Only counting, deletable, cuckoo, dleft, varcount, hier and hybrid\n"
"  filters can remove. Remove only\n"
"  keys that were added: removing a false positive can make the filter\n"
"  forget another key. Keys certainly absent are skipped and counted;\n"
"  a deletable filter cannot remove a key whose bits all lie in collided\n"
"  regions.\n"
"\n"
"OPTIONS\n"
INPUT_OPTIONS
HELP_SECTION
"\n"
KEYS_SECTION
"\n"
"EXIT STATUS\n"
"  0 every key removed; 1 saved, but some keys were absent or could not\n"
"  be removed (counts on stderr); 2 error (FILE unchanged).\n"
"\n"
"EXAMPLES\n"
"  bloomkit remove sessions.bkf expired.txt\n"},

{"info",
"NAME\n"
"  bloomkit info - describe a filter file\n"
"\n"
"SYNOPSIS\n"
"  bloomkit info FILE [--json]\n"
"\n"
"DESCRIPTION\n"
"  Reads FILE (mapped when over 16 MiB; checksums verified either way)\n"
"  and prints its type, parameters,\n"
"  items, estimated distinct items, fill, false-positive rate now and at\n"
"  capacity, and sizes.\n"
"\n"
"OPTIONS\n"
"      --json           one JSON object with the fields: file, type, the\n"
"                       type's parameters (classic: bits, hashes), capacity\n"
"                       (0: unknown), target_fpr, items, estimated_items,\n"
"                       fill (0..1), fpr_now, fpr_at_capacity, bytes\n"
"                       (memory), file_bytes, parts, seed (hex string),\n"
"                       can_remove, lockfree_add; a window filter adds\n"
"                       window_ms, generations and clock_ms (wall-clock\n"
"                       milliseconds since 1970; window_adds, clock_adds\n"
"                       with --window-by-count)\n"
HELP_SECTION
"\n"
"EXIT STATUS\n"
"  0 success; 2 error (missing, truncated or corrupt file).\n"
"\n"
"EXAMPLES\n"
"  bloomkit info urls.bkf\n"
"  bloomkit info --json urls.bkf | jq .fpr_now\n"},

{"merge",
"NAME\n"
"  bloomkit merge - union of filter files\n"
"\n"
"SYNOPSIS\n"
"  bloomkit merge OUT IN...\n"
"\n"
"DESCRIPTION\n"
"  Writes to OUT (atomically) a filter holding every key of every IN. The\n"
"  inputs must have the same type, size, hash count and seed: a filter\n"
"  made with the same create options. Otherwise the command says what\n"
"  differs and writes nothing. OUT may be one of the inputs.\n"
"\n"
"OPTIONS\n"
HELP_SECTION
"\n"
"EXIT STATUS\n"
"  0 written; 2 error.\n"
"\n"
"EXAMPLES\n"
"  bloomkit merge all.bkf monday.bkf tuesday.bkf\n"},

{"intersect",
"NAME\n"
"  bloomkit intersect - intersection of filter files\n"
"\n"
"SYNOPSIS\n"
"  bloomkit intersect OUT IN...\n"
"\n"
"DESCRIPTION\n"
"  Writes to OUT (atomically) a filter holding the keys present in every\n"
"  IN (plus more false positives than a filter built from those keys).\n"
"  The inputs must be compatible, as for merge.\n"
"\n"
"OPTIONS\n"
HELP_SECTION
"\n"
"EXIT STATUS\n"
"  0 written; 2 error.\n"
"\n"
"EXAMPLES\n"
"  bloomkit intersect both.bkf site-a.bkf site-b.bkf\n"},
{"verify",
"NAME\n"
"  bloomkit verify - check filter files completely\n"
"\n"
"SYNOPSIS\n"
"  bloomkit verify FILE...\n"
"\n"
"DESCRIPTION\n"
"  Reads each FILE from end to end and checks every checksum, header and\n"
"  payload, and every field, as a full load does, but without copying the\n"
"  filter into memory (the file is mapped read-only). Other commands that\n"
"  map large files check only the header. bloomkit-server's snapshot files\n"
"  (snap-<G>/<n>.bkf in its data directory) are filter files too; for a\n"
"  whole data directory use bloomkit-server --check-data --dir DIR.\n"
"\n"
"OPTIONS\n"
HELP_SECTION
"\n"
"OUTPUT\n"
"  One line per file on stdout: 'FILE: ok (TYPE, N bytes, every checksum\n"
"  verified)' or 'FILE: CORRUPT: what is wrong'.\n"
"\n"
"EXIT STATUS\n"
"  0 every file is sound; 1 a file is corrupt (damaged, truncated, or not\n"
"  a filter file); 2 an error that says nothing about the data (a missing\n"
"  or unreadable file, bad usage).\n"
"\n"
"EXAMPLES\n"
"  bloomkit verify seen.bkf\n"
"  bloomkit verify data/snap-7/*.bkf\n"},
{"copy",
"NAME\n"
"  bloomkit copy - copy filters between servers and Redis Clusters\n"
"\n"
"SYNOPSIS\n"
"  bloomkit copy SRC DST [--pattern P] [--replace] [--chunks]\n"
"                [--chunk-threshold SIZE] [--quiet]\n"
"\n"
"DESCRIPTION\n"
"  Copies every key of SRC whose name matches P (a glob, default '*') to\n"
"  DST with DUMP and RESTORE, keeping each key's time to live. SRC and DST\n"
"  are HOST:PORT of one server (bloomkit-server, or Redis with bloomkit.so)\n"
"  or of a Redis Cluster's nodes, comma-separated (IPv6 as [::1]:7000): all\n"
"  the masters of a cluster are scanned, and each key is restored on the\n"
"  master owning its slot (MOVED and ASK are followed). The payload is\n"
"  Redis's DUMP format, read and written by both bloomkit-server and the\n"
"  module, so this is the way from one machine to Redis Cluster, and back.\n"
"  A key that already exists on DST is an error unless --replace; every\n"
"  key that cannot be copied is named on stderr with the side (SRC or DST)\n"
"  and the node, the others are copied (a broken connection is opened\n"
"  again for the next keys).\n"
"  Big filters move in chunks: a bloomkit key (BF, CF, CBF, WF, SF, RS)\n"
"  whose MEMORY USAGE is over SIZE is copied with its X.SCANDUMP chunks\n"
"  (4 MiB each) given to X.LOADCHUNK, the next chunk read while the last\n"
"  is loaded. One DUMP reply of a big key could pass the server's\n"
"  client-output-buffer-limit (bloomkit-server: 256 MiB) and a RESTORE\n"
"  Redis's proto-max-bulk-len (512 MB); SIZE (default 64M) stays well\n"
"  under both and bounds the DUMP payloads held at once.\n"
"  RedisBloom's filters (TYPE MBbloom-- and MBbloomCF, from RedisBloom or\n"
"  Redis 8) are always copied by chunks: chunks carry no Redis version,\n"
"  and the copy keeps RedisBloom's layout, so it answers exactly as it did\n"
"  there (docs/MODULE.md, \"Moving from RedisBloom\"). Stop writes to a\n"
"  filter while it is copied by chunks (SCANDUMP is not a snapshot).\n"
"  $REDISCLI_AUTH is sent with AUTH to every server, as redis-cli does.\n"
"\n"
"OPTIONS\n"
"  -p, --pattern P      copy only keys matching P (SCAN MATCH syntax)\n"
"      --replace        overwrite keys DST already has\n"
"      --chunks         copy every bloomkit filter by chunks, whatever its size\n"
"      --chunk-threshold SIZE\n"
"                       by chunks above SIZE bytes (K, M, G: KiB, MiB, GiB;\n"
"                       default 64M)\n"
"  -q, --quiet          no summary line\n"
"  -h, --help           this text\n"
"\n"
"OUTPUT\n"
"  'copied N keys' on stdout, with failures and keys deleted meanwhile.\n"
"  Errors: 'bloomkit: copy: KEY: DST HOST:PORT: RESTORE: <reply>', or for\n"
"  the keys of a pipeline a broken connection lost: 'bloomkit: copy: K1,\n"
"  K2: SRC HOST:PORT: Server closed the connection (DUMP)'.\n"
"\n"
"EXIT STATUS\n"
"  0 every key copied; 2 a key could not be copied, or a server failed.\n"
"\n"
"EXAMPLES\n"
"  bloomkit copy 127.0.0.1:6380 10.0.0.1:7000,10.0.0.2:7000\n"
"  bloomkit copy 10.0.0.1:7000 127.0.0.1:6380 --pattern 'users:*'\n"
"  bloomkit copy redisbloom-host:6379 127.0.0.1:6380   # from RedisBloom\n"},
{"push",
"NAME\n"
"  bloomkit push - load a static filter or map file into a server key\n"
"\n"
"SYNOPSIS\n"
"  bloomkit push FILE SERVER KEY [--replace] [--chunk-size BYTES] [--quiet]\n"
"\n"
"DESCRIPTION\n"
"  FILE is a static filter (bloomkit create --type static) or a static map\n"
"  (bloomkit build-map). It is loaded and checked (every checksum), wrapped\n"
"  in the value container the SF.* commands use (docs/COMMANDS.md, \"Value\n"
"  encoding\": a 64-byte prefix, then the file image unchanged) and sent\n"
"  with SF.LOADCHUNK in chunks. KEY then answers SF.EXISTS, SF.MEXISTS,\n"
"  SF.GET, SF.MGET and SF.INFO exactly as bloomkit check and bloomkit get\n"
"  answer on FILE. SERVER is HOST:PORT of bloomkit-server or of Redis with\n"
"  bloomkit.so, or a Redis Cluster's nodes, comma-separated (the key goes\n"
"  to the master of its slot). $REDISCLI_AUTH is sent with AUTH.\n"
"  A KEY that exists is refused unless --replace (which replaces a static\n"
"  key; a key of another kind is a WRONGTYPE error). A push of more than\n"
"  one chunk loads a staging key in KEY's cluster slot, then renames it\n"
"  over KEY (RENAMENX without --replace): readers of KEY see the old filter\n"
"  until the new one is whole, never a half-loaded key (whose lookups\n"
"  answer 0). A chunk the server refuses stops the push with its error and\n"
"  leaves KEY as it was (the staging key is deleted).\n"
"\n"
"OPTIONS\n"
"      --replace            replace an existing static key\n"
"      --chunk-size BYTES   bytes per SF.LOADCHUNK (default 4194304)\n"
"  -q, --quiet              no summary line\n"
"  -h, --help               this text\n"
"\n"
"OUTPUT\n"
"  'pushed FILE to SERVER key KEY: N bytes in M chunks' on stdout.\n"
"\n"
"EXIT STATUS\n"
"  0 pushed; 2 the file, the server or a chunk failed.\n"
"\n"
"EXAMPLES\n"
"  bloomkit create --type static blocked.bkf blocked-urls.txt\n"
"  bloomkit push blocked.bkf 127.0.0.1:6380 blocked\n"
"  redis-cli -p 6380 SF.EXISTS blocked http://example.com/\n"},
{"pull",
"NAME\n"
"  bloomkit pull - save a server's static filter or map as a file\n"
"\n"
"SYNOPSIS\n"
"  bloomkit pull SERVER KEY FILE [--force] [--quiet]\n"
"\n"
"DESCRIPTION\n"
"  Reads KEY (a static filter or map, SF.*) with SF.SCANDUMP, checks the\n"
"  value and the filter image inside it as a load does, and saves the image\n"
"  to FILE atomically: the file bloomkit create --type static or bloomkit\n"
"  build-map wrote, usable by bloomkit check, get and info. An existing FILE\n"
"  is refused unless --force. SERVER as for bloomkit push.\n"
"\n"
"OPTIONS\n"
"  -f, --force          replace an existing FILE\n"
"  -q, --quiet          no summary line\n"
"  -h, --help           this text\n"
"\n"
"OUTPUT\n"
"  'pulled SERVER key KEY to FILE: N bytes' on stdout.\n"
"\n"
"EXIT STATUS\n"
"  0 saved; 2 the key is missing or not static, the server failed, or FILE\n"
"  could not be written.\n"
"\n"
"EXAMPLES\n"
"  bloomkit pull 127.0.0.1:6380 blocked blocked-copy.bkf\n"},

{"cluster",
"NAME\n"
"  bloomkit cluster - one filter sharded over the masters of a Redis Cluster\n"
"\n"
"SYNOPSIS\n"
"  bloomkit cluster create --nodes HOST:PORT[,...] NAME --capacity N\n"
"                          [--error P] [--shards S] [--type bloom|cuckoo]\n"
"  bloomkit cluster add    --nodes HOST:PORT[,...] NAME [INPUT...] [OPTIONS]\n"
"  bloomkit cluster check  --nodes HOST:PORT[,...] NAME [INPUT...] [OPTIONS]\n"
"  bloomkit cluster info   --nodes HOST:PORT[,...] NAME [--shards S]\n"
"\n"
"DESCRIPTION\n"
"  The cluster's nodes run bloomkit.so (docs/MODULE.md). Filter NAME is S\n"
"  pieces, the keys NAME{0} ... NAME{S-1}; each item lives in exactly one\n"
"  piece, chosen from its hash, so the filter answers with the rate of one\n"
"  piece and spreads over every master. Redis Cluster hashes only the tag\n"
"  of NAME{i}, the number i: piece i is in the slot of \"i\".\n"
"\n"
"  create  BF.RESERVE (or CF.RESERVE) of every piece, each for about N/S\n"
"          items; refused when a piece exists. Warns when a master holds\n"
"          no piece.\n"
"  add     adds the keys (BF.INSERT / CF.INSERT NOCREATE, pipelined per\n"
"          node); a summary goes to stderr unless -q.\n"
"  check   prints each input line whose key is probably present, in input\n"
"          order (-v: certainly absent).\n"
"  info    capacity, items, filters and bytes summed over the pieces, per\n"
"          master and per piece.\n"
"\n"
"  add, check and info need the --shards the filter was created with: the\n"
"  piece of a key depends on it. They check that piece S-1 exists and\n"
"  piece S does not.\n"
"\n"
"OPTIONS\n"
"      --nodes LIST     HOST:PORT of cluster nodes, comma-separated (IPv6 as\n"
"                       [ADDR]:PORT); the first that answers CLUSTER SLOTS\n"
"                       gives the slot map. A server without cluster\n"
"                       support holds every piece.\n"
"      --shards S       pieces, 1 to 16384 (default 64)\n"
"  -n, --capacity N     create: items of the whole filter\n"
"  -e, --error P        create: false-positive rate in (0, 1), bloom only\n"
"  -t, --type TYPE      create: bloom (default: BF.* pieces) or cuckoo (CF.*)\n"
"  -v, --invert         check: print the keys that are certainly absent\n"
"  -c, --total          check: print only the number of selected lines\n"
INPUT_OPTIONS
HELP_SECTION
"\n"
KEYS_SECTION
"\n"
"ENVIRONMENT\n"
"  REDISCLI_AUTH        password sent with AUTH on every connection\n"
"\n"
"EXIT STATUS\n"
"  0 success (check: some line selected); 1 check selected no line;\n"
"  2 error (a node refusing connections, an error reply, a redirection\n"
"  loop: the message names the node).\n"
"\n"
"EXAMPLES\n"
"  bloomkit cluster create --nodes 10.0.0.1:6379 users -n 1G -e 0.001\n"
"  bloomkit cluster add --nodes 10.0.0.1:6379,10.0.0.2:6379 users ids.txt\n"
"  bloomkit cluster check --nodes 10.0.0.1:6379 -v users new-ids.txt\n"},

{"build-map",
"NAME\n"
"  bloomkit build-map - build a static map (Bloomier filter) of key -> value\n"
"\n"
"SYNOPSIS\n"
"  bloomkit build-map FILE [PAIRS...] [--error P] [--seed S] [OPTIONS]\n"
"\n"
"DESCRIPTION\n"
"  Reads lines KEY<TAB>VALUE (split at the last tab, or -d C; VALUE a whole\n"
"  number from 0 to 4294967295; blank lines skipped) from PAIRS (none, or\n"
"  '-', is standard input) and saves a static map to FILE. Every key of the\n"
"  map gets exactly its value back from 'bloomkit get'; a key not in the\n"
"  map is reported absent except with probability about P (it then gets an\n"
"  arbitrary value). Values take as many bits as the largest needs; the\n"
"  check takes ceil(log2(1/P)) bits; both x ~1.125 per key. A key given\n"
"  twice with the same value is stored once; with two values it is an\n"
"  error naming the key and both lines. The map cannot be changed: build\n"
"  it again. Every pair is held in memory while building.\n"
"\n"
"OPTIONS\n"
"  -e, --error P        rate at which absent keys pass (default 0.01, which\n"
"                       takes 7 check bits: 0.78%)\n"
"      --seed S         64-bit hash seed\n"
"  -d, --delimiter C    separator between key and value (default tab)\n"
"      --force          replace FILE if it exists\n"
"  -q, --quiet          no summary line on stderr\n"
HELP_SECTION
"\n"
"EXIT STATUS\n"
"  0 built; 2 error.\n"
"\n"
"EXAMPLES\n"
"  bloomkit build-map shards.bkf url-shard.tsv\n"
"  bloomkit get shards.bkf urls.txt\n"},

{"get",
"NAME\n"
"  bloomkit get - look keys up in a static map\n"
"\n"
"SYNOPSIS\n"
"  bloomkit get MAP [INPUT...] [-v] [OPTIONS]\n"
"\n"
"DESCRIPTION\n"
"  Prints KEY<TAB>VALUE for every input key the map holds (with -v: the\n"
"  keys it does not hold, without values). A key that is not in the map\n"
"  is printed too with the probability given to build-map --error.\n"
"\n"
"OPTIONS\n"
"  -v, --invert         print the keys not in the map\n"
INPUT_OPTIONS
HELP_SECTION
"\n"
KEYS_SECTION
"\n"
"EXIT STATUS\n"
"  0 some key printed; 1 none; 2 error.\n"},

{"diff",
"NAME\n"
"  bloomkit diff - what each of two key sets lacks, by set reconciliation\n"
"\n"
"SYNOPSIS\n"
"  bloomkit diff A B [--seed S] [OPTIONS]\n"
"\n"
"DESCRIPTION\n"
"  Prints '< KEY' for each key only in A and '> KEY' for each key only in\n"
"  B (each once, in file order). The two sides are reconciled as two sites\n"
"  would be: A sends a strata estimator of its keys (40 KB), B answers with\n"
"  an invertible Bloom lookup table sized for the estimated difference\n"
"  (sent again twice as large if it does not decode), A asks for B's keys\n"
"  it lacks and each side sends the keys the other lacks. The summary on\n"
"  stderr gives the bytes of each message: they grow with the difference,\n"
"  not with the files. Keys are compared by a 64-bit hash: two different\n"
"  keys with equal hashes (odds ~ n^2 / 2^65) would count as one.\n"
"\n"
"  A or B may be a set on a server (RS.* keys of bloomkit-server, or of\n"
"  Redis with bloomkit.so), written HOST:PORT/KEY ([::1]:6380/KEY for\n"
"  IPv6; ./HOST:PORT/KEY is a file). The messages then go over the Redis\n"
"  protocol (RS.STRATA, RS.ESTIMATE, RS.IBLT, RS.DIFF, RS.GETIDS); a\n"
"  missing key is an empty set. The seed is the server's (--seed must\n"
"  agree). stderr adds the bytes each way and the RESP bytes sent to and\n"
"  received from each server. A server side's keys print in its order.\n"
"  $REDISCLI_AUTH gives a password.\n"
"\n"
"OPTIONS\n"
"      --seed S         hash seed of the exchange\n"
"  -0, --null           keys end in NUL; output lines too\n"
"  -f, --field N        the key is field N of each line\n"
"  -d, --delimiter C    field separator for --field\n"
"      --skip-empty     ignore empty keys\n"
"  -q, --quiet          no summary on stderr\n"
"      --no-decompress  read gzip or zstd input as raw bytes\n"
HELP_SECTION
"\n"
"EXIT STATUS\n"
"  0 the two sides hold the same keys; 1 they differ; 2 error.\n"},

{"sync",
"NAME\n"
"  bloomkit sync - give each of two key sets the keys it lacks\n"
"\n"
"SYNOPSIS\n"
"  bloomkit sync A B [--seed S] [OPTIONS]\n"
"\n"
"DESCRIPTION\n"
"  Reconciles A and B as 'bloomkit diff' does, then appends to A the keys\n"
"  only in B and to B the keys only in A (one per line, or NUL-terminated\n"
"  with -0), so that both hold the union. A file side must be a regular\n"
"  file. A server side (HOST:PORT/KEY, see bloomkit diff --help) gets its\n"
"  keys by RS.ADD (RS.RESERVE with the exchange's seed first when the key\n"
"  is missing). The summary on stderr gives the bytes the exchange took.\n"
"\n"
"OPTIONS\n"
"      --seed S         hash seed of the exchange\n"
"  -0, --null           keys end in NUL\n"
"      --skip-empty     ignore empty keys\n"
"  -q, --quiet          no summary on stderr\n"
HELP_SECTION
"\n"
"EXIT STATUS\n"
"  0 synchronised; 2 error.\n"},
};

int cli_help(const char *cmd, FILE *f)
{
    for (size_t i = 0; i < sizeof(helps) / sizeof(helps[0]); i++)
        if (strcmp(helps[i].name, cmd) == 0) {
            fputs(helps[i].text, f);
            return 0;
        }
    return -1;
}

int cli_wants_help(const cli_options *o, const char *cmd)
{
    if (!(o->given & OPTBIT(OPT_HELP))) return 0;
    cli_help(cmd, stdout);
    return 1;
}
