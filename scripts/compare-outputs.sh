#!/usr/bin/env bash
# compare-outputs.sh OLD_BIGMAC NEW_BIGMAC — every output the CLI writes for the examples and the
# test specs (plan -o, simulate --json, render ascii/svg/html/trace/csv under three policies,
# simulate --compare text and JSON), written by both binaries and compared byte for byte. Use it
# to show that a refactor changed no output (issue 26: "outputs stay byte-identical").
# Prints the files that differ and "N of M identical"; exits 1 when any differs.
set -u
[ $# -eq 2 ] || { echo "usage: $0 OLD_BIGMAC NEW_BIGMAC" >&2; exit 2; }
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
write_all() { # BIN OUT
    local b=$1 o=$2 s n pol f
    mkdir -p "$o"
    for s in examples/*.json tests/specs/*.json; do
        n=$(basename "$s" .json)
        for pol in bigmac optimus unified; do
            "$b" plan "$s" --policy $pol -o "$o/$n.$pol.table.json" >/dev/null 2>&1
            "$b" simulate "$s" --policy $pol --json >"$o/$n.$pol.sim.json" 2>&1
            for f in ascii svg html trace csv; do
                "$b" render "$s" --policy $pol --format $f --width 100 -o "$o/$n.$pol.$f" >/dev/null 2>&1
            done
        done
        "$b" simulate "$s" --compare >"$o/$n.compare.txt" 2>&1
        "$b" simulate "$s" --compare --json >"$o/$n.compare.json" 2>&1
    done
}
write_all "$1" "$dir/old"
write_all "$2" "$dir/new"
total=$(ls "$dir/old" | wc -l)
differ=$(diff -rq "$dir/old" "$dir/new" | sed "s|$dir/old/||; s|$dir/new/||")
n=$(printf '%s' "$differ" | grep -c . || true)
[ -n "$differ" ] && printf '%s\n' "$differ"
echo "$((total - n)) of $total identical"
[ "$n" -eq 0 ]
