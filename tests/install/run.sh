#!/bin/sh
# Install test: `cmake --install` into a scratch prefix, then build a user's
# program against it twice, with find_package(bloomkit) and with pkg-config
# (static and shared), and run each.
# Usage: run.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null

cmake -S "$src/tests/install" -B "$tmp/consumer" \
    -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/consumer" >/dev/null
"$tmp/consumer/consumer"

libdir=$(ls -d "$tmp"/prefix/lib* | head -n 1)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
test "$(pkg-config --modversion bloomkit)" = "$(sed -n 's/^project(bloomkit VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")"
# shellcheck disable=SC2046
cc -std=c11 -o "$tmp/pc-static" "$src/tests/install/consumer.c" \
    $(pkg-config --define-prefix --cflags bloomkit) "$libdir/libbloomkit.a" -lpthread -lm
"$tmp/pc-static"
# shellcheck disable=SC2046
cc -std=c11 -o "$tmp/pc-shared" "$src/tests/install/consumer.c" \
    $(pkg-config --define-prefix --cflags --libs bloomkit)
LD_LIBRARY_PATH="$libdir" "$tmp/pc-shared"
echo "install test: find_package, pkg-config static and shared all work"
