#!/usr/bin/env bash
# NOT YET WORKING (left by the session that wrote it): a transfer hangs before the continuer
# reports (the continuer in the second namespace never says DONE; not diagnosed). scripts/test
# does not run it. Fix it, then call it from scripts/test with --quick.
# Continuation streams across a real, shaped link: two network namespaces joined by a veth pair,
# shaped with tc, one stream end in each (handoff-bench's stream-originator and stream-continuer,
# real processes speaking the wire contract). Every transfer must arrive whole: the continuer
# reads to the end, whose length and CRC-32C are checked, and reports what it received.
#
#   sudo deploy/netns/stream-link.sh [--bench PATH] [--clean-mib N] [--lossy-mib N] [--cut-mib N] [--quick]
#   sudo deploy/netns/stream-link.sh --cleanup
#
# Three transfers:
#   clean  tbf 20 Mbit/s, --clean-mib (default 50): the rate against the link's
#   lossy  netem 20 ms each way (40 ms RTT) and 1 % loss each way, --lossy-mib (default 4)
#   cut    tbf 20 Mbit/s, --cut-mib (default 20), the link taken down for 3 s in the middle:
#          the pair resumes; the continuer reports resumes and the bytes that arrived twice
# --quick (what scripts/test runs): 20 MiB clean, 3 MiB lossy, 12 MiB cut.
#
# Exit status: 0 every transfer arrived whole; 1 one did not; 2 bad usage; 77 skipped: network
# namespaces are not available here (not root, no `ip`/`tc`, or a sandbox refuses them).

set -euo pipefail

readonly SKIP=77
readonly NS_A=handoff-sa NS_B=handoff-sb VETH_A=hs-a VETH_B=hs-b A_IP=10.78.0.1 B_IP=10.78.0.2

bench="" clean_mib=50 lossy_mib=4 cut_mib=20 mode=run
usage() { sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$0"; }
say() { printf '==> %s\n' "$*"; }
skip() { printf 'stream-link.sh: skipped: %s\n' "$*" >&2; exit "$SKIP"; }
die() { printf 'stream-link.sh: error: %s\n' "$*" >&2; exit 1; }

while (($#)); do
    case "$1" in
        --bench) bench=$2; shift 2 ;;
        --clean-mib) clean_mib=$2; shift 2 ;;
        --lossy-mib) lossy_mib=$2; shift 2 ;;
        --cut-mib) cut_mib=$2; shift 2 ;;
        --quick) clean_mib=20 lossy_mib=3 cut_mib=12; shift ;;
        --cleanup) mode=cleanup; shift ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done

command -v ip >/dev/null 2>&1 || skip "no 'ip' command (install iproute2)"
command -v tc >/dev/null 2>&1 || skip "no 'tc' command (install iproute2)"
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"

cleanup() {
    for ns in "$NS_A" "$NS_B"; do
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        # shellcheck disable=SC2086
        [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
    [ -z "${work:-}" ] || rm -rf "$work"
}
if [ "$mode" = cleanup ]; then cleanup; exit 0; fi

if [ -z "$bench" ]; then
    bench=$(command -v handoff-bench || true)
    [ -n "$bench" ] || bench="$(cd "$(dirname "$0")/../.." && pwd)/.build/debug/handoff-bench"
fi
[ -x "$bench" ] || die "no handoff-bench at $bench (build it: swift build --product handoff-bench)"

cleanup
work=$(mktemp -d)
trap cleanup EXIT INT TERM
ip netns add "$NS_A" 2>/dev/null || skip "'ip netns add' is refused here"
ip netns add "$NS_B"
ip link add "$VETH_A" netns "$NS_A" type veth peer name "$VETH_B" netns "$NS_B" || skip "veth pairs are refused here"
ip -n "$NS_A" addr add "$A_IP/24" dev "$VETH_A"
ip -n "$NS_B" addr add "$B_IP/24" dev "$VETH_B"
for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
ip -n "$NS_A" link set "$VETH_A" up
ip -n "$NS_B" link set "$VETH_B" up

shape() {  # shape tbf|lossy: the same qdisc on both ends of the link
    for side in "$NS_A:$VETH_A" "$NS_B:$VETH_B"; do
        ns=${side%%:*} dev=${side##*:}
        tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
        case "$1" in
            tbf) tc -n "$ns" qdisc add dev "$dev" root tbf rate 20mbit burst 32kbit latency 400ms ;;
            lossy) tc -n "$ns" qdisc add dev "$dev" root netem delay 20ms loss 1% limit 10000 ;;
        esac
    done
}

# transfer NAME MIB [cut]: one stream, originator in A, continuer in B; prints the continuer's report.
transfer() {
    local name=$1 mib=$2 cut=${3:-} bytes=$(($2 * 1024 * 1024))
    : >"$work/$name.out"
    sleep infinity | ip netns exec "$NS_A" "$bench" stream-originator --size-bytes "$bytes" --listen "$A_IP" >"$work/$name.out" 2>"$work/$name.originator.log" &
    local originator=$!
    for _ in $(seq 100); do grep -q '^READY' "$work/$name.out" && break; sleep 0.1; done
    read -r _ endpoint id < <(grep '^READY' "$work/$name.out") || die "$name: the originator did not start: $(tail -5 "$work/$name.originator.log")"
    ip netns exec "$NS_B" "$bench" stream-continuer --peer "$endpoint" --id "$id" --size-bytes "$bytes" --listen "$B_IP" \
        >"$work/$name.continuer" 2>"$work/$name.continuer.log" &
    local continuer=$!
    if [ -n "$cut" ]; then
        # Halfway at 20 Mbit/s, then 3 s with the link down on both ends.
        sleep "$(awk -v m="$mib" 'BEGIN { printf "%.1f", m * 8 * 1.048576 / 20 / 2 }')"
        ip -n "$NS_B" link set "$VETH_B" down
        ip -n "$NS_A" link set "$VETH_A" down
        sleep 3
        ip -n "$NS_A" link set "$VETH_A" up
        ip -n "$NS_B" link set "$VETH_B" up
    fi
    local status=0
    wait "$continuer" || status=$?
    kill "$originator" 2>/dev/null || true
    pkill -P "$originator" 2>/dev/null || true
    if [ "$status" -ne 0 ] || ! grep -q '^DONE' "$work/$name.continuer"; then
        tail -20 "$work/$name.continuer.log" >&2
        die "$name: the transfer did not complete"
    fi
    # DONE seconds bytes peak resumes duplicate-bytes
    read -r _ seconds received _ resumes duplicates < <(grep '^DONE' "$work/$name.continuer")
    [ "$received" -eq "$bytes" ] || die "$name: received $received of $bytes bytes"
    local rate
    rate=$(awk -v b="$bytes" -v s="$seconds" 'BEGIN { printf "%.2f", b * 8 / s / 1e6 }')
    printf '%s: %d MiB whole (length and CRC-32C checked) in %.1f s: %s Mbit/s' "$name" "$mib" "$seconds" "$rate"
    case "$name" in
        clean | cut) printf ' (%s %% of the 20 Mbit/s link)' "$(awk -v r="$rate" 'BEGIN { printf "%.0f", r / 20 * 100 }')" ;;
    esac
    printf '; resumes %s, bytes that arrived twice %s\n' "$resumes" "$duplicates"
}

shape tbf
transfer clean "$clean_mib"
shape lossy
transfer lossy "$lossy_mib"
shape tbf
transfer cut "$cut_mib" cut
say "every transfer arrived whole"
