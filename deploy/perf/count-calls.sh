#!/usr/bin/env bash
# Counts calls into the Swift runtime and malloc over one handoff-bench run, every process of it:
# exact figures (uprobes, not samples) that move with the code and not with a noisy machine.
#
#   deploy/perf/count-calls.sh [--bench PATH] [--callers COMM] [--spans] -- adverts --count 5000 --trials 1
#
# Prints swift_retain, swift_release, malloc and swift_beginAccess for the whole run, and the retains
# and releases of them that were on an object (not on nil or a tagged value, which the runtime
# returns from at once); divide by the messages the run sent. With --callers COMM (a thread name:
# handoff-loop-0 for nodes' event loops, handoff-broker for a broker's thread) it records call
# graphs of the retains and releases on objects and lists, per count, the first caller that is not
# one of the compiler's copy and destroy thunks (value witnesses, outlined copies): the code whose
# copies cost the counts. Needs root and perf (linux-perf); about 20 s plus
# the run (a run under --callers is ten to a hundred times slower and writes gigabytes: keep it short).
# With --spans, only what happens inside the spans the benchmark measures counts (MeasuredSpan, as
# profile-span.sh): set-up and tear-down (a publisher withdrawing every activity as it stops) stay
# out, so a count divided by the messages the spans sent is the steady state's. COUNT_CALLS_TOP=N
# lists the first N callers (40 by default).
set -euo pipefail

bench=.build/release/handoff-bench
callers=""
spans=()
while [ $# -gt 0 ]; do
    case "$1" in
        --bench) bench=$2; shift 2 ;;
        --callers) callers=$2; shift 2 ;;
        --spans) spans=(-D -1); shift ;;
        --) shift; break ;;
        *) echo "usage: $0 [--bench PATH] [--callers COMM] [--spans] -- BENCH-ARGS..." >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--bench PATH] [--callers COMM] [--spans] -- BENCH-ARGS..." >&2; exit 2; }
command -v perf >/dev/null || { echo "perf is not installed (apt-get install linux-perf)" >&2; exit 77; }

swift_core=$(ldd "$bench" | awk '/libswiftCore.so/ { print $3 }')
libc=$(ldd "$bench" | awk '/libc.so.6/ { print $3 }')
[ -n "$swift_core" ] && [ -n "$libc" ] || { echo "cannot find libswiftCore.so and libc.so.6 of $bench" >&2; exit 1; }
# The probes stay defined until the machine restarts (perf probe -d 'probe_libswiftCore:*' removes them).
for symbol in swift_retain swift_release swift_beginAccess; do
    perf probe -l 2>/dev/null | grep -q "probe_libswiftCore:$symbol " || perf probe -q -x "$swift_core" "$symbol" >/dev/null
done
perf probe -l 2>/dev/null | grep -q "probe_libc:malloc " || perf probe -q -x "$libc" malloc >/dev/null
# The same two calls with their argument, counted only on an object: the runtime is called as well
# on nil and on tagged values that hold none (an empty or small string's, for one), and returns at
# once; in `adverts` half the releases were such calls.
for symbol in swift_retain swift_release; do
    perf probe -l 2>/dev/null | grep -q "probe_libswiftCore:${symbol}_object " \
        || perf probe -q -x "$swift_core" "${symbol}_object=$symbol object=%di:u64" >/dev/null
done

events=probe_libswiftCore:swift_retain,probe_libswiftCore:swift_release,probe_libc:malloc,probe_libswiftCore:swift_beginAccess
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [ ${#spans[@]} -gt 0 ]; then
    mkfifo "$out/control"
    export HANDOFF_BENCH_PERF_FIFO="$out/control"
    spans+=(--control "fifo:$out/control")
fi
# The Swift backtracer can hang over a process libzmq aborted; a run that aborts just ends.
export SWIFT_BACKTRACE=enable=no

on_objects='object != 0 && object < 0x8000000000000000'
if [ -z "$callers" ]; then
    perf stat "${spans[@]}" -a -x, -e "$events" \
        -e probe_libswiftCore:swift_retain_object --filter "$on_objects" \
        -e probe_libswiftCore:swift_release_object --filter "$on_objects" \
        -o "$out/stat" -- "$bench" "$@" >"$out/run" 2>&1 || { tail -5 "$out/run" >&2; exit 1; }
    awk -F, '/probe/ { sub(/.*:/, "", $3); sub(/_object$/, " (on objects)", $3); printf "%-28s %12.0f\n", $3, $1 }' "$out/stat"
    exit 0
fi

# Callers of the calls on objects only (the ones that cost an atomic operation).
perf record "${spans[@]}" -q -e probe_libswiftCore:swift_retain_object --filter "$on_objects" \
    -e probe_libswiftCore:swift_release_object --filter "$on_objects" -g -a -o "$out/perf.data" -- "$bench" "$@" >"$out/run" 2>&1 \
    || { tail -5 "$out/run" >&2; exit 1; }
perf script -i "$out/perf.data" --comm "$callers" -F event,ip,sym --max-stack 12 2>/dev/null | awk '
    /probe_libswiftCore/ { kind = ($0 ~ /release/) ? "release" : "retain"; depth = 0; done = 0; next }
    NF >= 2 && !done {
        depth++
        if (depth == 1) next                         # the runtime function itself
        symbol = $2
        # Copy and destroy thunks and the runtime: look further up for the code that asked.
        if (symbol ~ /(wcp|wxx|WOc|WOh|WOe|WOy|wCP|WOb|WOd|WOr|WOs|Owcp|Owxx|Tm|wca|wta|wtk|WOi)$/ ||
            symbol ~ /^(tuple_|swift_arrayDestroy|__swift_|_swift_release_dealloc|swift_release|swift_retain)/) next
        count[kind " " symbol]++
        done = 1
    }
    END { for (key in count) print count[key], key }' | sort -rn | head -${COUNT_CALLS_TOP:-40} | cut -c1-200 | if command -v swift-demangle >/dev/null; then swift-demangle --simplified; else cat; fi
