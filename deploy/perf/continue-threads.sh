#!/usr/bin/env bash
# Where a continue's round trip between two processes spends CPU, thread by thread, against raw
# REQ/REP between the same two kinds of process: `perf stat -e task-clock --per-thread` attached
# to both ends (the serving end before the asking one starts, the asking end 0.01 s after it
# starts: later, and a run of 10,000 misses a fifth of its round trips).
#
#   deploy/perf/continue-threads.sh [--bench PATH] [--rounds N] [--loops "default 1"]
#
# Prints each run's p50/p99 (µs) and each thread's CPU per round trip (µs): libzmq's I/O thread
# (ZMQbg/IO/0) and the event loops (handoff-loop-N) of the continuer and the originator, then of
# raw REQ and REP. Needs perf (linux-perf); task-clock is a software counter, so it works on VMs
# without hardware counters. On the device tool's server: `bash .device/figures.sh --threads`
# (deploy/perf/device-figures.sh packs this script with perf).
set -uo pipefail

bench=.build/release/handoff-bench
rounds=30000
loop_counts="default 1"
while [ $# -gt 0 ]; do
    case "$1" in
        --bench) bench=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --loops) loop_counts=$2; shift 2 ;;
        *) echo "usage: $0 [--bench PATH] [--rounds N] [--loops \"default 1 ...\"]" >&2; exit 2 ;;
    esac
done
command -v perf >/dev/null || { echo "perf is not installed (apt-get install linux-perf)" >&2; exit 77; }
[ -x "$bench" ] || { echo "no $bench: swift build -c release --product handoff-bench" >&2; exit 1; }
export SWIFT_BACKTRACE=enable=no
total=$((rounds + 200))  # the askers' 200 round trips of warm-up count too
work=$(mktemp -d)
trap 'exec 7>&- 2>/dev/null; pkill -P $$ 2>/dev/null; rm -rf "$work"' EXIT

per_thread() {  # a perf stat -x, --per-thread file: CPU per round trip by thread name
    awk -F, -v total="$total" '$1 ~ /-[0-9]+$/ && $2 + 0 > 0 {
        name = $1; sub(/-[0-9]+$/, "", name); sum[name] += $2
        if (name ~ /^handoff-loop-/) { loops += $2; if (!(name in named)) { named[name] = 1; looping++ } }
    } END {
        for (name in sum) if (sum[name] * 1000 / total >= 0.3) printf "    %-22s %8.2f µs a round trip\n", name, sum[name] * 1000 / total
        if (looping > 1) printf "    %-22s %8.2f µs a round trip\n", "(the loops together)", loops * 1000 / total
    }' "$1" | sort -k2 -rn
}

# The READY line a serving process of the bench printed into `$1`, once it has (10 s at most).
ready_line() {
    for _ in $(seq 100); do grep -q '^READY' "$1" && break; sleep 0.1; done
    grep '^READY' "$1" || { cat "$1" >&2; return 1; }
}

# Measures one run: perf stat attached to the serving process `$1` (ready) and, 0.01 s after it
# starts, to the asking command (the rest of the arguments), which it waits for; then prints its
# p50/p99 and both ends' CPU by thread, the asking end named `$asking`, the serving one `$serving`.
measure() {
    local server=$1; shift
    perf stat -x, -e task-clock --per-thread -p "$server" -o "$work/serving.stat" &
    local serving_stat=$!
    sleep 0.3
    "$@" >"$work/asking" 2>&1 &
    local asker=$!
    sleep 0.01
    perf stat -x, -e task-clock --per-thread -p "$asker" -o "$work/asking.stat" &
    local asking_stat=$!
    wait "$asker"; wait "$asking_stat"
    # A serving end that runs on (the originator) is counted up to here; one that ends has ended.
    kill -INT "$serving_stat" 2>/dev/null; wait "$serving_stat"
    echo "  p50 / p99 $(grep -o 'DONE.*' "$work/asking" | cut -d' ' -f2-3) µs"
    echo "   $asking:"; per_thread "$work/asking.stat"
    echo "   $serving:"; per_thread "$work/serving.stat"
}

handoff() {
    rm -rf "$work"/*; mkfifo "$work/input"
    "$bench" continue-originator <"$work/input" >"$work/originator" 2>&1 &
    local originator=$!
    exec 7>"$work/input"  # the originator runs until its standard input closes
    local endpoint id
    read -r _ endpoint id < <(ready_line "$work/originator") || return 1
    asking="the continuer" serving="the originator" \
        measure "$originator" "$bench" continue-continuer --peer "$endpoint" --id "$id" --rounds "$rounds"
    exec 7>&-; wait "$originator"
}

raw() {
    rm -rf "$work"/*
    "$bench" raw-rep-server --rounds "$total" >"$work/server" 2>&1 &
    local server=$!
    local endpoint
    read -r _ endpoint < <(ready_line "$work/server") || return 1
    asking="REQ" serving="REP" measure "$server" "$bench" raw-req-client --peer "$endpoint" --rounds "$rounds"
    wait "$server"
}

echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $rounds round trips a run"
for loops in $loop_counts; do
    echo "== Handoff, event loops per process: $loops"
    if [ "$loops" = default ]; then handoff; else HANDOFF_EVENT_LOOP_THREADS=$loops handoff; fi
done
echo "== raw REQ/REP"
raw
