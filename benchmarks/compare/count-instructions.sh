#!/usr/bin/env bash
# Instructions per operation of one build: benchmarks/compare/count-instructions.sh ROOT OP N1 N2
# ROOT is a built checkout; OP one of instruction-loop.cjs's loops. Runs the loop under valgrind's
# callgrind (node --single-threaded, so that compilation and GC are counted on the one thread)
# with N1 and with N2 operations and prints (count(N2) - count(N1)) / (N2 - N1).
set -euo pipefail
root=$1 op=$2 n1=$3 n2=$4
here=$(cd "$(dirname "$0")" && pwd)
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null node --single-threaded "$here/instruction-loop.cjs" "$root" "$op" "$1" 2>&1 |
    grep -o 'Collected : [0-9]*' | grep -o '[0-9]*'
}
a=$(count "$n1")
b=$(count "$n2")
echo "$root $op $(((b - a) / (n2 - n1))) instructions per operation"
