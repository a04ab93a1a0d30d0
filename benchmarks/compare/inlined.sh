#!/usr/bin/env bash
# What TurboFan inlined into one function of a hot path:
#   benchmarks/compare/inlined.sh FUNCTION SCRIPT ARGS...
# e.g. inlined.sh putTyped benchmarks/compare/instruction-loop.cjs <built checkout> typedPut 400000
# runs `node SCRIPT ARGS...` with V8's inlining trace and prints one line per optimised compile of
# FUNCTION: the functions inlined into it, in the order TurboFan took them (unnamed ones, such as
# the generated pointer check, are left out), and a line for each deoptimisation. TurboFan
# inlines within a budget (460 bytecode bytes per function, 920 in all per compile), taking calls
# in order of frequency, so a function under the limit may take the budget another one needed; the
# counts of count-instructions.sh move with what is printed here (docs/benchmarks.md).
set -euo pipefail
fn=$1
shift
node --trace-opt --trace-deopt --trace-turbo-inlining --turbo-filter="$fn" "$@" 2>&1 |
  awk '
/\[compiling method/ { list = "" }
/^Inlining / { if (match($0, /SharedFunctionInfo [A-Za-z0-9_$]+/)) list = list " " substr($0, RSTART + 19, RLENGTH - 19) }
/\[completed compiling/ { print "compile:" list }
/^\[bailout \(|marking dependent code/ { print "deopt" }'
