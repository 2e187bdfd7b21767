#!/bin/sh
# Checks one Promela model with spin: run_model.sh MODEL.pml pass|fail [-DNAME ...]
# pass: spin must find no error (no assertion violation, no invalid end state, search
# complete). fail: spin must find at least one (the deliberately broken variants).
# Works in a fresh temporary directory below the current one; prints spin's verdict and,
# for an error, the first steps of the counterexample.
set -eu
model=$1
expect=$2
shift 2
spin=${SPIN:-spin}
cc=${CC:-cc}
name=$(basename "$model" .pml)
work=$(mktemp -d "$PWD/spin-$name.XXXXXX") # absolute: the trap runs after the cd
trap 'rm -rf "$work"' EXIT
cp "$model" "$work/$name.pml"
cd "$work"
"$spin" "$@" -a "$name.pml" >spin.log 2>&1 || { cat spin.log; exit 2; }
"$cc" -O2 -DSAFETY -DVECTORSZ=2048 -o pan pan.c >cc.log 2>&1 || { cat cc.log; exit 2; }
./pan -m1000000 -n >pan.log 2>&1 || true
errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' pan.log | head -n 1)
states=$(sed -n 's/^ *\([0-9e.+]*\) states, stored.*/\1/p' pan.log | head -n 1)
echo "spin $name $*: errors ${errors:-?}, states stored ${states:-?} (expected: $expect)"
grep -E "pan:[0-9]+: |depth too small" pan.log || true
if [ -z "$errors" ]; then
    cat pan.log
    exit 2
fi
if grep -q "max search depth too small" pan.log; then
    echo "search incomplete: raise -m"
    exit 2
fi
if [ "$expect" = pass ]; then
    [ "$errors" -eq 0 ] || { "$spin" "$@" -t -p "$name.pml" 2>&1 | head -n 60; exit 1; }
else
    if [ "$errors" -gt 0 ]; then
        echo "counterexample (first steps):"
        "$spin" "$@" -t -p "$name.pml" 2>&1 | head -n 40
        exit 0
    fi
    echo "the broken variant passed: the model no longer catches the bug"
    exit 1
fi
