#!/usr/bin/env bash
# Instructions of one open of a pile: benchmarks/compare/recovery-instructions.sh ROOT DIR
# DIR holds the snapshot that `node recovery-open.cjs make ROOT DIR N` made. For a fresh copy of the
# clean pile and one of the killed one, runs recovery-open.cjs's open (exiting right after it, no
# close) under valgrind's callgrind (node --single-threaded, so that compilation and GC are counted
# on the one thread), and the same process stopped just before the open; prints the differences
# (user-space instructions of the open alone).
set -euo pipefail
root=$1 dir=$2
here=$(cd "$(dirname "$0")" && pwd)
work="$dir-work"
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null node --single-threaded "$here/recovery-open.cjs" open "$root" "$@" 2>&1 |
    grep -o 'Collected : [0-9]*' | grep -o '[0-9]*'
}
fresh() {
  rm -rf "$work"
  cp -r "$dir/$1" "$work"
  sync
}
base=$(count "$dir/clean" stop)
fresh clean
clean=$(count "$work" exit)
fresh killed
killed=$(count "$work" exit)
rm -rf "$work"
echo "$root clean open $((clean - base)) instructions, open after kill -9 $((killed - base)) instructions"
