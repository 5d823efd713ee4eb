#!/usr/bin/env bash
# The figures docs/performance.md records, on another machine (the device tool's 16-core server),
# in one call: packs release builds here, and writes the one script to run there.
#
#   deploy/perf/device-figures.sh                 # here: builds, packs .device/ (about 50 MB)
#   bash .device/figures.sh [--profile|--threads] # there (device run, carry [".device"]):
#                                                 # about 2 minutes, 3 with --profile or --threads
#
# The pack is ../shared/device/bundle.sh's (release builds and the libraries a bare machine lacks),
# plus the same two binaries unstripped (symbols for perf; strip keeps the code, so the figures are
# the stripped builds') and, where perf is installed here, perf with its libraries. There, the loop
# count is the one thing varied: the default, one loop and fifteen, interleaved, because that server
# showed fifteen loops costing 40–70 % more CPU per advertisement (docs/performance.md, "At most
# two loops"). `--profile` writes perf reports of the advertisement benchmark to $OUT; `--threads`
# adds a continue's CPU by thread against raw REQ/REP (continue-threads.sh, beside this). The first
# line says which CPU ran it: two calls can land on different hosts, so compare within a call.
# Continue runs twice a round, with the loops' reply polling (the default) and without: on the
# 2-core VM polling gained nothing between processes and cost 40 µs of CPU per continue
# (docs/performance.md, "Where a continue between two processes goes"); where each process has
# cores of its own is where it should pay.
set -euo pipefail
top=$(git rev-parse --show-toplevel); cd "$top"
bundle=../shared/device/bundle.sh
[ -x "$bundle" ] || { echo "no $bundle here: this packs for the device tool's machines" >&2; exit 77; }
"$bundle" handoff handoff-bench HandoffContactsPlugin

stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/sym" "$stage/perf/lib"
cp .build/release/handoff .build/release/handoff-bench "$stage/sym/"
tar -cJf .device/sym.tar.xz -C "$stage/sym" .
rm -f .device/perf.tar.xz
if perf=$(command -v perf); then
    cp -L "$perf" "$stage/perf/"
    ldd "$perf" | awk '$3 ~ /^\// { print $3 }' | grep -vE '/(libc|libm|libpthread|libdl|librt)\.so' |
        while read -r lib; do cp -L "$lib" "$stage/perf/lib/"; done
    tar -cJf .device/perf.tar.xz -C "$stage/perf" .
fi
cp deploy/perf/continue-threads.sh .device/

cat > .device/figures.sh <<'FIGURES'
#!/usr/bin/env bash
# There: the standard figures, the loop count varied; --profile adds perf reports under $OUT.
set -u
export SWIFT_BACKTRACE=enable=no
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/run.sh" true >/dev/null                  # unpacks to /tmp/hb
tar -xJf "$here/sym.tar.xz" -C /tmp/hb/bin           # the same builds, with symbols
bench() { bash "$here/run.sh" handoff-bench "$@"; }
section() { echo; echo "=== $(date +%T) $*"; }
grep -m1 "model name" /proc/cpuinfo; nproc
section "floor"; bench advert-floor --trials 3 | grep -E "floor: every|^raw"
for round in 1 2; do
    for loops in default 1 15; do
        section "adverts, loops: $loops (round $round)"
        if [ $loops = default ]; then bench adverts --trials 2; else HANDOFF_EVENT_LOOP_THREADS=$loops bench adverts --trials 2; fi |
            sed -n '/^tasks/p;/^raw libzmq PUB/,/^one at a time/p'
    done
    section "continue (round $round)"; bench continue | sed -n '/^tasks/p;/^reply polling/p;/^raw libzmq REQ/,/^Summary/p'
    section "continue, reply polling off (round $round)"
    bench continue --reply-polling 0 | sed -n '/^reply polling/p;/^raw libzmq REQ/,/^Summary/p'
done
section "streams"; bench streams --only processes --runs 7 | sed -n '/^raw libzmq, 256/,/^ratio Handoff \/ raw, each/p'
section "broker"; bench broker-capacity --trials 3 | grep -E "^  |^memory"
if [ "${1:-}" = --profile ] && [ -f "$here/perf.tar.xz" ] && [ -n "${OUT:-}" ]; then
    mkdir -p /tmp/perf && tar -xJf "$here/perf.tar.xz" -C /tmp/perf
    perf() { LD_LIBRARY_PATH=/tmp/perf/lib /tmp/perf/perf "$@"; }
    section "profile: adverts, default loops"
    perf record -a -g -F 999 -o /tmp/adverts.data -- bash "$here/run.sh" handoff-bench adverts --trials 1 >/dev/null 2>&1
    perf report -i /tmp/adverts.data --no-children --sort comm --stdio -g none 2>/dev/null | grep -vE '^#|^$' | head -25
    perf report -i /tmp/adverts.data --no-children --sort dso,sym --stdio -g none 2>/dev/null | grep -vE '^#|^$' | head -150 >"$OUT/adverts-flat.txt"
    perf report -i /tmp/adverts.data --children --sort sym --stdio -g none 2>/dev/null | grep -vE '^#|^$' | head -150 >"$OUT/adverts-children.txt"
fi
if [ "${1:-}" = --threads ] && [ -f "$here/perf.tar.xz" ]; then
    mkdir -p /tmp/perf && tar -xJf "$here/perf.tar.xz" -C /tmp/perf
    section "continue: CPU by thread, against raw REQ/REP"
    PATH=/tmp/perf:$PATH LD_LIBRARY_PATH=/tmp/hb/lib:/tmp/perf/lib bash "$here/continue-threads.sh" --bench /tmp/hb/bin/handoff-bench --loops "default 1 15"
fi
section "done"
FIGURES
chmod +x .device/figures.sh
echo "packed: $(du -sh .device | cut -f1) in .device/; there: bash .device/figures.sh [--profile] (carry [\".device\"])"
