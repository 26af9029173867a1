#!/usr/bin/env bash
# The kernel-cache line that ends a CI run (.ci/run):
#   ci_cache_report.sh start DIR STATE   note the entries DIR holds now, and the time
#   ci_cache_report.sh end DIR STATE     print "dyngen CI kernel cache: R reused from earlier
#                                        runs, C compiled, hit rate H (suite S s) [DIR]"
# An entry used during the run has a modification time after the start (every disk hit refreshes
# it: Note [A hit refreshes an entry] in runtime/disk_cache.cc). Used entries that were there at
# the start were reused from earlier runs; new ones were compiled by this run (one NVRTC or host
# compile each, however many processes then loaded them).
set -euo pipefail
mode="$1" dir="$2" state="$3"
entries() { find "$dir" -maxdepth 1 -type f -name '*.dgk' "$@" -printf '%f\n' 2>/dev/null | sort; }
case "$mode" in
  start)
    entries > "$state/before"
    touch "$state/marker"
    date +%s > "$state/start"
    ;;
  end)
    entries -newer "$state/marker" > "$state/used"
    reused=$(comm -12 "$state/before" "$state/used" | wc -l)
    compiled=$(comm -13 "$state/before" "$state/used" | wc -l)
    total=$((reused + compiled))
    rate="n/a"
    [ "$total" -gt 0 ] && rate="$((100 * reused / total))%"
    seconds=$(($(date +%s) - $(cat "$state/start")))
    echo "dyngen CI kernel cache: $reused reused from earlier runs, $compiled compiled," \
         "hit rate $rate (suite ${seconds} s) [$dir]"
    ;;
  *)
    echo "usage: ci_cache_report.sh start|end DIR STATE" >&2
    exit 2
    ;;
esac
