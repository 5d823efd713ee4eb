#!/usr/bin/env bash
# Counts, per continue round trip between two processes, what each side asks of the runtime: jobs
# queued on the event loops (EventLoopGroup.submit), executor switches (swift_task_switch), hops
# onto a default actor (swift_defaultActor_enqueue), continuations resumed, retains, releases and
# mallocs. Exact figures (uprobes, not samples): they move with the code and not with a noisy
# machine, where the latency they cost does not show through a VM's spread.
#
#   deploy/perf/count-jobs.sh [--bench PATH] [--rounds N]
#
# Runs `handoff-bench continue-originator` and, against it, `continue-continuer --rounds N` (200 of
# warm-up first: the figures divide by N + 200). Needs root and perf (linux-perf); the probes slow
# each call a great deal, so the round trips reported here are far slower than the benchmark's.
set -euo pipefail

bench=.build/release/handoff-bench
rounds=2000
while [ $# -gt 0 ]; do
    case "$1" in
        --bench) bench=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        *) echo "usage: $0 [--bench PATH] [--rounds N]" >&2; exit 2 ;;
    esac
done
command -v perf >/dev/null || { echo "perf is not installed (apt-get install linux-perf)" >&2; exit 77; }
[ -x "$bench" ] || { echo "no $bench: swift build -c release --product handoff-bench" >&2; exit 1; }
bench=$(realpath "$bench")

libraries=$(ldd "$bench")
swift_core=$(awk '/libswiftCore.so/ { print $3 }' <<<"$libraries")
concurrency=$(awk '/libswift_Concurrency.so/ { print $3 }' <<<"$libraries")
libc=$(awk '/libc.so.6/ { print $3 }' <<<"$libraries")
[ -n "$swift_core" ] && [ -n "$concurrency" ] && [ -n "$libc" ] || { echo "cannot find the Swift runtime and libc of $bench" >&2; exit 1; }
submit=$(nm "$bench" | awk '$3 ~ /^\$s15HandoffExecutor14EventLoopGroupC6submityyScJF$/ { print $3 }')
[ -n "$submit" ] || { echo "no EventLoopGroup.submit in $bench" >&2; exit 1; }

# The bench's probe is made afresh (its address moves with every build); the runtime's stay defined
# until the machine restarts (perf probe -d 'probe_libswift*' removes them).
perf probe -q -d 'handoffbench:*' >/dev/null 2>&1 || true
perf probe -q -x "$bench" "handoffbench:loop_submit=$submit" >/dev/null
for symbol in swift_task_switch swift_defaultActor_enqueue swift_continuation_resume; do
    perf probe -l 2>/dev/null | grep -q "probe_libswift_Concurrency:$symbol " || perf probe -q -x "$concurrency" "$symbol" >/dev/null
done
for symbol in swift_retain swift_release; do
    perf probe -l 2>/dev/null | grep -q "probe_libswiftCore:$symbol " || perf probe -q -x "$swift_core" "$symbol" >/dev/null
done
perf probe -l 2>/dev/null | grep -q "probe_libc:malloc " || perf probe -q -x "$libc" malloc >/dev/null
events=handoffbench:loop_submit,probe_libswift_Concurrency:swift_task_switch,probe_libswift_Concurrency:swift_defaultActor_enqueue
events=$events,probe_libswift_Concurrency:swift_continuation_resume,probe_libswiftCore:swift_retain,probe_libswiftCore:swift_release,probe_libc:malloc

out=$(mktemp -d)
originator=""
trap 'exec 7>&- 2>/dev/null || true; [ -n "$originator" ] && kill "$originator" 2>/dev/null; rm -rf "$out"' EXIT
export SWIFT_BACKTRACE=enable=no
mkfifo "$out/input"
"$bench" continue-originator <"$out/input" >"$out/originator" 2>&1 &
originator=$!
exec 7>"$out/input"  # the originator runs until its standard input closes
for _ in $(seq 100); do grep -q '^READY' "$out/originator" && break; sleep 0.1; done
read -r _ endpoint id < <(grep '^READY' "$out/originator") || { cat "$out/originator" >&2; exit 1; }

perf stat -x, -e "$events" -p "$originator" -o "$out/originator.stat" &
watcher=$!
sleep 0.5
perf stat -x, -e "$events" -o "$out/continuer.stat" -- "$bench" continue-continuer --peer "$endpoint" --id "$id" --rounds "$rounds" >"$out/continuer"
kill -INT "$watcher"
wait "$watcher" || true
exec 7>&-
wait "$originator" || true
originator=""

total=$((rounds + 200))
echo "per continue round trip ($total round trips, $(grep -o 'DONE.*' "$out/continuer") µs p50 p99 under the probes)"
printf '%-32s %12s %12s\n' "" continuer originator
awk -F, -v total="$total" '
    FNR == 1 { side++ }
    $3 ~ /:/ { name = $3; sub(/.*:/, "", name); if (name == "loop_submit") name = "jobs queued on the loops"; value[name, side] = $1 / total; names[name] = 1 }
    END { for (name in names) printf "%-32s %12.2f %12.2f\n", name, value[name, 1], value[name, 2] }
' "$out/continuer.stat" "$out/originator.stat" | sort
