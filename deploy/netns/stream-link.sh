#!/usr/bin/env bash
# Continuation streams across a real, shaped link: two hosts (network namespaces) joined through a
# third that plays the wire (a bridge, or a lossy, slow link), one stream end on each host
# (handoff-bench's stream-originator and stream-continuer: real processes speaking the wire
# contract). Every transfer must arrive whole: the continuer reads to the end, whose length and
# CRC-32C are checked, and reports what it received.
#
#   sudo deploy/netns/stream-link.sh [--bench PATH] [--clean-mib N] [--lossy-mib N] [--cut-mib N] [--cut-seconds S] [--quick]
#   sudo deploy/netns/stream-link.sh --cleanup
#
#   handoff-sa 10.78.0.1 (originator) --veth-- handoff-sm (the wire) --veth-- handoff-sb 10.78.0.2 (continuer)
#
# Three transfers:
#   clean  tbf 20 Mbit/s each way, --clean-mib (default 50): the rate against the link's
#   lossy  20 ms each way (40 ms RTT) and 1 % loss each way, --lossy-mib (default 4): tc netem,
#          or deploy/netns/link-emulator.py in the wire's namespace where the kernel has no netem
#   cut    tbf 20 Mbit/s, --cut-mib (default 20), the wire cut for --cut-seconds (default 3) in the
#          middle of the transfer. TCP itself often rides out 3 s (its retransmissions get through
#          once the wire is back); a cut longer than the streams' idle timeout (5 s) always makes
#          the pair resume. Both ends report resumes, bytes sent again, and bytes that came twice.
# --quick (what scripts/test runs): 20 MiB clean, 3 MiB lossy, 12 MiB cut; about 30 s.
#
# Exit status: 0 every transfer arrived whole; 1 one did not; 2 bad usage; 77 skipped: network
# namespaces are not available here (not root, no `ip`/`tc`, or a sandbox refuses them).

set -euo pipefail

readonly SKIP=77 RATE_MBIT=20
readonly NS_A=handoff-sa NS_B=handoff-sb NS_WIRE=handoff-sm
readonly VETH_A=hs-a VETH_B=hs-b WIRE_A=hs-ma WIRE_B=hs-mb BRIDGE=hs-br
readonly A_IP=10.78.0.1 B_IP=10.78.0.2

bench="" clean_mib=50 lossy_mib=4 cut_mib=20 cut_seconds=3 mode=run
here=$(cd "$(dirname "$0")" && pwd)
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
        --cut-seconds) cut_seconds=$2; shift 2 ;;
        --quick) clean_mib=20 lossy_mib=3 cut_mib=12; shift ;;
        --cleanup) mode=cleanup; shift ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done

command -v ip >/dev/null 2>&1 || skip "no 'ip' command (install iproute2)"
command -v tc >/dev/null 2>&1 || skip "no 'tc' command (install iproute2)"
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"

emulator=""
cleanup() {
    [ -z "$emulator" ] || kill "$emulator" 2>/dev/null || true
    for ns in "$NS_A" "$NS_B" "$NS_WIRE"; do
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
    [ -n "$bench" ] || bench="$here/../../.build/debug/handoff-bench"
fi
[ -x "$bench" ] || die "no handoff-bench at $bench (build it: swift build --product handoff-bench)"

cleanup
work=$(mktemp -d)
trap cleanup EXIT INT TERM
ip netns add "$NS_A" 2>/dev/null || skip "'ip netns add' is refused here"
ip netns add "$NS_B"
ip netns add "$NS_WIRE"
ip link add "$VETH_A" netns "$NS_A" type veth peer name "$WIRE_A" netns "$NS_WIRE" || skip "veth pairs are refused here"
ip link add "$VETH_B" netns "$NS_B" type veth peer name "$WIRE_B" netns "$NS_WIRE"
ip -n "$NS_WIRE" link add "$BRIDGE" type bridge
ip -n "$NS_WIRE" link set "$BRIDGE" up
ip -n "$NS_A" addr add "$A_IP/24" dev "$VETH_A"
ip -n "$NS_B" addr add "$B_IP/24" dev "$VETH_B"
for ns in "$NS_A" "$NS_B" "$NS_WIRE"; do ip -n "$ns" link set lo up; done
ip -n "$NS_A" link set "$VETH_A" up
ip -n "$NS_B" link set "$VETH_B" up
for port in "$WIRE_A" "$WIRE_B"; do ip -n "$NS_WIRE" link set "$port" master "$BRIDGE" up; done

# wire bridge|emulated: the two hosts joined by the kernel's bridge, or by the user-space emulator.
wire() {
    [ -z "$emulator" ] || { kill "$emulator"; wait "$emulator" 2>/dev/null || true; emulator=""; }
    case "$1" in
        bridge) for port in "$WIRE_A" "$WIRE_B"; do ip -n "$NS_WIRE" link set "$port" master "$BRIDGE"; done ;;
        emulated)
            for port in "$WIRE_A" "$WIRE_B"; do ip -n "$NS_WIRE" link set "$port" nomaster; done
            # Whole frames on the wire: no segmentation or checksum left to the (absent) hardware.
            ip netns exec "$NS_A" ethtool -K "$VETH_A" tx off tso off gso off gro off >/dev/null 2>&1
            ip netns exec "$NS_B" ethtool -K "$VETH_B" tx off tso off gso off gro off >/dev/null 2>&1
            ip netns exec "$NS_WIRE" python3 "$here/link-emulator.py" "$WIRE_A" "$WIRE_B" --delay-ms 20 --loss 0.01 --seed 7 \
                >"$work/emulator.log" 2>&1 &
            emulator=$!
            sleep 0.3
            ;;
    esac
}

# shape tbf|lossy: the same shaping on both hosts' ends of the link; lossy_by says how it is lossy.
lossy_by=""
shape() {
    for side in "$NS_A:$VETH_A" "$NS_B:$VETH_B"; do
        tc -n "${side%%:*}" qdisc del dev "${side##*:}" root 2>/dev/null || true
    done
    case "$1" in
        tbf)
            wire bridge
            for side in "$NS_A:$VETH_A" "$NS_B:$VETH_B"; do
                tc -n "${side%%:*}" qdisc add dev "${side##*:}" root tbf rate "${RATE_MBIT}mbit" burst 32kbit latency 400ms
            done
            ;;
        lossy)
            if tc -n "$NS_A" qdisc add dev "$VETH_A" root netem delay 20ms loss 1% limit 10000 2>/dev/null; then
                wire bridge
                tc -n "$NS_B" qdisc add dev "$VETH_B" root netem delay 20ms loss 1% limit 10000
                lossy_by="tc netem"
            elif command -v ethtool >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then
                wire emulated
                lossy_by="link-emulator.py (this kernel has no netem)"
            fi
            ;;
    esac
}

# transfer NAME MIB [cut]: one stream, originator on A, continuer on B; prints the continuer's report.
transfer() {
    local name=$1 mib=$2 cut=${3:-} bytes=$(($2 * 1024 * 1024))
    # The originator reports and exits when its standard input closes: a fifo this script holds.
    mkfifo "$work/$name.stdin"
    ip netns exec "$NS_A" "$bench" stream-originator --size-bytes "$bytes" --listen "$A_IP" \
        <"$work/$name.stdin" >"$work/$name.out" 2>"$work/$name.originator.log" &
    local originator=$!
    exec 9>"$work/$name.stdin"
    for _ in $(seq 100); do grep -q '^READY' "$work/$name.out" && break; sleep 0.1; done
    local endpoint id
    read -r _ endpoint id < <(grep '^READY' "$work/$name.out") || die "$name: the originator did not start: $(tail -5 "$work/$name.originator.log")"
    # Bounded: three times the time the link needs, plus half a minute.
    local limit=$((mib * 8 * 3 / RATE_MBIT + 30))
    [ -z "$cut" ] || limit=$((limit + cut_seconds))
    timeout --signal=KILL "$limit" ip netns exec "$NS_B" "$bench" stream-continuer --peer "$endpoint" --id "$id" \
        --size-bytes "$bytes" --listen "$B_IP" >"$work/$name.continuer" 2>"$work/$name.continuer.log" &
    local continuer=$!
    if [ -n "$cut" ]; then
        # Halfway through at the link's rate, the wire is cut (both hosts keep their addresses).
        sleep "$(awk -v m="$mib" -v r="$RATE_MBIT" 'BEGIN { printf "%.1f", m * 8 * 1.048576 / r / 2 }')"
        ip -n "$NS_WIRE" link set "$WIRE_A" down
        ip -n "$NS_WIRE" link set "$WIRE_B" down
        sleep "$cut_seconds"
        ip -n "$NS_WIRE" link set "$WIRE_A" up
        ip -n "$NS_WIRE" link set "$WIRE_B" up
    fi
    local status=0
    wait "$continuer" || status=$?
    exec 9>&-
    wait "$originator" 2>/dev/null || true
    if [ "$status" -ne 0 ] || ! grep -q '^DONE' "$work/$name.continuer"; then
        [ "$status" -ne 137 ] || echo "stream-link.sh: $name: no end after $limit s" >&2
        tail -20 "$work/$name.continuer.log" >&2
        die "$name: the transfer did not complete (continuer status $status)"
    fi
    # DONE seconds bytes peak resumes duplicate-bytes cpu-seconds
    local seconds received resumes duplicates rate
    read -r _ seconds received _ resumes duplicates _ < <(grep '^DONE' "$work/$name.continuer")
    [ "$received" -eq "$bytes" ] || die "$name: received $received of $bytes bytes"
    rate=$(awk -v b="$bytes" -v s="$seconds" 'BEGIN { printf "%.2f", b * 8 / s / 1e6 }')
    printf '%s: %d MiB whole (length and CRC-32C checked) in %.1f s: %s Mbit/s' "$name" "$mib" "$seconds" "$rate"
    case "$name" in
        clean | cut) printf ' (%s %% of the %d Mbit/s link)' "$(awk -v r="$rate" -v l="$RATE_MBIT" 'BEGIN { printf "%.0f", r / l * 100 }')" "$RATE_MBIT" ;;
    esac
    # PEAK bytes resumes bytes-sent-again cpu-seconds (the originator's side of the same story)
    local resent
    read -r _ _ _ resent _ < <(grep '^PEAK' "$work/$name.out") || resent="?"
    printf '; resumes %s, bytes sent again %s, bytes that arrived twice %s\n' "$resumes" "${resent:-?}" "$duplicates"
    whole=$((whole + 1))
}
whole=0 expected=0

shape tbf
expected=$((expected + 1))
transfer clean "$clean_mib"
shape lossy
if [ -n "$lossy_by" ]; then
    rtt=$(ip netns exec "$NS_A" ping -c 5 -i 0.2 -q "$B_IP" 2>/dev/null | awk -F/ '/^rtt|^round-trip/ { print $5 }')
    printf 'lossy link: 20 ms each way, 1 %% loss each way, by %s; ping RTT %s ms\n' "$lossy_by" "${rtt:-?}"
    expected=$((expected + 1))
    transfer lossy "$lossy_mib"
    [ -z "$emulator" ] || { kill "$emulator"; wait "$emulator" 2>/dev/null || true; emulator=""; sed 's/^/  /' "$work/emulator.log"; }
else
    echo "lossy: skipped: this kernel has no netem, and ethtool or python3 is missing for link-emulator.py"
fi
shape tbf
expected=$((expected + 1))
transfer cut "$cut_mib" cut
# A transfer that stopped without a report (a shell error in it) is a failure, never a pass.
[ "$whole" -eq "$expected" ] || die "$whole of $expected transfers reported arriving whole"
say "every transfer arrived whole"
