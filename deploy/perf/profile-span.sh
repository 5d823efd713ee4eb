#!/usr/bin/env bash
# Samples one handoff-bench run with call graphs, every process of it, but only inside the spans
# its benchmarks measure (MeasuredSpan: the bench turns perf's counters on and off through a FIFO),
# so set-up and tear-down stay out of the profile. Then prints, per thread name, its share of the
# samples and its hottest symbols (self time); the data file stays for perf report.
#
#   deploy/perf/profile-span.sh [--bench PATH] [--out FILE] [--top N] -- adverts --count 20000 --trials 1
#
# Spans are marked in: adverts (the throughput phase of each Handoff trial), continue (the timed
# round trips), streams (each Handoff transfer, in one process and between processes; not the raw
# baselines'). Needs perf (linux-perf).
#
# A process started while the counters are off (perf 6.1: -D -1 with a control FIFO) is recorded
# without its name and its mappings: its threads show as ":PID" and its own code as [unknown],
# the kernel's symbols still resolved. So between processes (streams' continuer and originator,
# adverts' broker process) only the kernel side of the children reads; their code needs a profile
# of its own (perf record -p PID of a running child, or the same run without -D).
set -euo pipefail

bench=.build/release/handoff-bench
out=perf.span.data
top=25
while [ $# -gt 0 ]; do
    case "$1" in
        --bench) bench=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --top) top=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "usage: $0 [--bench PATH] [--out FILE] [--top N] -- BENCH-ARGS..." >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--bench PATH] [--out FILE] [--top N] -- BENCH-ARGS..." >&2; exit 2; }
command -v perf >/dev/null || { echo "perf is not installed (apt-get install linux-perf)" >&2; exit 77; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkfifo "$work/control"
export HANDOFF_BENCH_PERF_FIFO="$work/control"
# The Swift backtracer can hang over a process libzmq aborted; a run that aborts just ends.
export SWIFT_BACKTRACE=enable=no
perf record -q -F 4000 -g -D -1 --control "fifo:$work/control" -o "$out" -- "$bench" "$@" >"$work/run" 2>&1 \
    || { tail -5 "$work/run" >&2; exit 1; }
grep -E 'CPU per|floor' "$work/run" || true

echo "samples by thread name (every process)"
perf report -i "$out" --no-children --sort comm -q -g none 2>/dev/null | head -12
for comm in $(perf report -i "$out" --no-children --sort comm -q -g none 2>/dev/null | awk '$1+0 >= 5 { print $2 }'); do
    echo
    echo "$comm: hottest symbols (self)"
    perf report -i "$out" --no-children --comm "$comm" --sort dso,sym -q -g none 2>/dev/null | head -"$top" | cut -c1-180 \
        | if command -v swift-demangle >/dev/null; then swift-demangle --simplified; else cat; fi
done
