#!/usr/bin/env bash
# Scale mode against the exact simulator (docs/scale.md, section 'Scale against exact'): every
# built-in policy on four workloads (uniform fill, uniform updates, zipfian updates, deletes),
# write amplification and peak space amplification side by side.
#
#   scripts/scale-check.sh ENTRIES [SCALE_KEYS] [OUT_DIR] [extra `strata sim` flags...]
#
# SCALE_KEYS is the scale mode's key budget (default 4194304, `--scale` alone). POLICIES (default
# all) and WORKLOADS (default the four) narrow the set. The JSON of every
# run goes to OUT_DIR (default target/scale-check/ENTRIES), and scripts/scale-table.py prints the
# comparison from it.
set -euo pipefail
entries=${1:?entries}
keys=${2:-4194304}
out=${3:-target/scale-check/$entries}
shift $(( $# < 3 ? $# : 3 ))
mkdir -p "$out"
strata=${STRATA:-target/release/strata}
for workload in ${WORKLOADS:-fillrandom updaterandom updatezipf deleterandom}; do
  for mode in exact scale; do
    flags=()
    [ "$mode" = scale ] && flags=(--scale "$keys")
    file="$out/$workload-$mode.json"
    [ -s "$file" ] && continue
    echo "== $workload $mode" >&2
    # T = 10 and tables of the 4 MiB buffer for every policy: the settings of docs/scale.md.
    "$strata" sim --policies "${POLICIES:-all}" --workload "$workload" --entries "$entries" \
      --size-ratio 10 --target-file-size 4MiB "${flags[@]}" "$@" --json >"$file.tmp"
    mv "$file.tmp" "$file"
  done
done
python3 "$(dirname "$0")/scale-table.py" "$out"
