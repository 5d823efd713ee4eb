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
        if (name ~ /^handoff-loop-/) { loops += $2; looping++ }
    } END {
        for (name in sum) if (sum[name] * 1000 / total >= 0.3) printf "    %-22s %8.2f µs a round trip\n", name, sum[name] * 1000 / total
        if (looping > 1) printf "    %-22s %8.2f µs a round trip\n", "(the loops together)", loops * 1000 / total
    }' "$1" | sort -k2 -rn
}

handoff() {
    rm -rf "$work"/*; mkfifo "$work/input"
    "$bench" continue-originator <"$work/input" >"$work/originator" 2>&1 &
    local originator=$!
    exec 7>"$work/input"  # the originator runs until its standard input closes
    for _ in $(seq 100); do grep -q '^READY' "$work/originator" && break; sleep 0.1; done
    local endpoint id
    read -r _ endpoint id < <(grep '^READY' "$work/originator") || { cat "$work/originator" >&2; return 1; }
    perf stat -x, -e task-clock --per-thread -p "$originator" -o "$work/originator.stat" &
    local serving=$!
    sleep 0.3
    "$bench" continue-continuer --peer "$endpoint" --id "$id" --rounds "$rounds" >"$work/continuer" 2>&1 &
    local continuer=$!
    sleep 0.01
    perf stat -x, -e task-clock --per-thread -p "$continuer" -o "$work/continuer.stat" &
    local asking=$!
    wait "$continuer"; wait "$asking"
    kill -INT "$serving"; wait "$serving"
    exec 7>&-; wait "$originator"
    echo "  Handoff: p50 / p99 $(grep -o 'DONE.*' "$work/continuer" | cut -d' ' -f2-3) µs"
    echo "   the continuer:"; per_thread "$work/continuer.stat"
    echo "   the originator:"; per_thread "$work/originator.stat"
}

raw() {
    rm -rf "$work"/*
    "$bench" raw-rep-server --rounds "$total" >"$work/server" 2>&1 &
    local server=$!
    for _ in $(seq 100); do grep -q '^READY' "$work/server" && break; sleep 0.1; done
    local endpoint
    read -r _ endpoint < <(grep '^READY' "$work/server") || { cat "$work/server" >&2; return 1; }
    perf stat -x, -e task-clock --per-thread -p "$server" -o "$work/server.stat" &
    local serving=$!
    sleep 0.3
    "$bench" raw-req-client --peer "$endpoint" --rounds "$rounds" >"$work/client" 2>&1 &
    local client=$!
    sleep 0.01
    perf stat -x, -e task-clock --per-thread -p "$client" -o "$work/client.stat" &
    local asking=$!
    wait "$client"; wait "$asking"; wait "$server"; wait "$serving"
    echo "  raw REQ/REP: p50 / p99 $(grep -o 'DONE.*' "$work/client" | cut -d' ' -f2-3) µs"
    echo "   REQ:"; per_thread "$work/client.stat"
    echo "   REP:"; per_thread "$work/server.stat"
}

echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $rounds round trips a run"
for loops in $loop_counts; do
    echo "== event loops per process: $loops"
    if [ "$loops" = default ]; then handoff; else HANDOFF_EVENT_LOOP_THREADS=$loops handoff; fi
done
echo "== raw"
raw
