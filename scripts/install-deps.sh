#!/bin/sh
# Install the Debian packages bloomkit needs, and only those that are missing.
#
# Usage: scripts/install-deps.sh [--bench]
#   --bench  also install what the benchmarks compare against (libbloom-dev).
#
# Runs `apt-get update` at most once, and only when something is missing, so
# a repeat run costs a few dpkg-query calls. Needs root (or sudo) only then.
set -eu

# package         why
# cmake           the build system
# make            the thin top-level Makefile
# gcc g++         the compiler; g++ checks that the public header is valid C++
# pkg-config      finds libxxhash and libcmocka
# libxxhash-dev   XXH3-128 key hashing and XXH3-64 checksums
# libcmocka-dev   unit-test framework run under CTest
# clang           libFuzzer fuzz targets (fuzz/)
# libclang-rt-14-dev  sanitizer and libFuzzer runtimes for clang
# --bench adds: libbloom-dev (the C peer), time (GNU time -v: peak memory)
# libuv1-dev     bloomkit-server's event loop
# redis-tools    redis-cli: the server's integration tests drive it
# python3-redis  a real client library (bf()/cf() helpers) for the tests
# redis-server   the Redis module's tests load bloomkit.so into it
# libhiredis-dev the C Redis client: `bloomkit cluster` routes sharded filters
#                over a Redis Cluster's masters (pipelining, CLUSTER SLOTS)
# zlib1g-dev     the CLI reads gzip-compressed key files (crawl logs,
#                blocklists) without a separate gunzip
# libzstd-dev    ... and zstd-compressed ones, the other common format
# nodejs npm     node-redis 5 (npm's `redis`, pinned by tests/node/package-lock.json,
#                installed into tests/node/node_modules by `npm ci` below): a real
#                RESP3 client whose typed BF/CF API the tests drive. Checked as
#                commands, so a nodejs packaged elsewhere (with its npm) counts.
# postgresql     the database the guard example (examples/guard/) protects: its
#                test starts a throwaway cluster with initdb/pg_ctl/psql
packages="cmake make gcc g++ pkg-config libxxhash-dev libcmocka-dev clang libclang-rt-14-dev libuv1-dev redis-tools python3-redis redis-server libhiredis-dev zlib1g-dev libzstd-dev postgresql"

for arg in "$@"; do
    case "$arg" in
        --bench) packages="$packages libbloom-dev time" ;;
        *) echo "install-deps.sh: unknown option '$arg'" >&2; exit 2 ;;
    esac
done
command -v node >/dev/null 2>&1 || packages="$packages nodejs"
command -v npm >/dev/null 2>&1 || packages="$packages npm"

# tests/node/node_modules from the committed lock file, only when missing
node_modules() {
    dir="$(dirname "$0")/../tests/node"
    [ -d "$dir/node_modules/redis" ] && return 0
    echo "install-deps.sh: npm ci in tests/node (node-redis for the tests)" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
}

missing=""
for p in $packages; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
        *" installed") ;;
        *) missing="$missing $p" ;;
    esac
done

if [ -z "$missing" ]; then
    node_modules
    exit 0
fi

echo "install-deps.sh: installing:$missing" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
        echo "install-deps.sh: need root to install:$missing" >&2; exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
node_modules
