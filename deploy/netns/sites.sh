#!/usr/bin/env bash
# Three sites joined into one bus through an upstream broker, with Linux network namespaces.
#
#   sudo deploy/netns/sites.sh [--handoff PATH] [--keep]
#   sudo deploy/netns/sites.sh --cleanup          # remove namespaces left by a killed run
#
# Four namespaces on one bridge (inside the hub's namespace), each site 20 ms from the hub each
# way (tc netem on both ends of its link, so 40 ms between two sites; where the kernel has no
# netem, deploy/netns/link-emulator.py on each site's link, as stream-link.sh does):
#
#   hsites-hub  10.78.0.1   handoff broker (the upstream)       :5555 / :5556
#   hsites-a    10.78.0.2   handoff broker --upstream the hub   127.0.0.1:5555 / :5556, and its nodes
#   hsites-b    10.78.0.3   the same
#   hsites-c    10.78.0.4   the same
#
# The scenario: a node at site A advertises an activity; a node at site B that follows its type
# (a monitor) sees it, and a late joiner at B lists it from B's own broker; site C, whose node
# follows another type, receives none of it (its broker caches nothing). Then site B's link to the
# hub is cut for 8 s (longer than the 6 s lease: what B knew of A lapses), site A advertises a
# second activity, and B does not see it; the link comes back and B lists both within 2 s. Each broker's counters (messages up, down, returned) are printed, and
# no site's own messages came back down its link (each crosses each link at most once).
# Everything is removed on exit, on error and on Ctrl-C.
#
# Exit status: 0 it worked; 1 it did not (the logs are printed); 2 bad usage; 77 skipped: network
# namespaces are not available here.

set -euo pipefail

readonly SKIP=77
readonly NS_HUB=hsites-hub NS_A=hsites-a NS_B=hsites-b NS_C=hsites-c
readonly ALL_NS=("$NS_HUB" "$NS_A" "$NS_B" "$NS_C")
readonly HUB_IP=10.78.0.1 PREFIX_LEN=24 BRIDGE=hsbr0
readonly HUB_FRONTEND="tcp://$HUB_IP:5555" HUB_BACKEND="tcp://$HUB_IP:5556"
readonly LOCAL=(tcp://127.0.0.1:5555 tcp://127.0.0.1:5556)
readonly TYPE=org.sites.edit

handoff_arg="" keep=0 mode=scenario
usage() { sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$0"; }
say() { printf '==> %s\n' "$*"; }
skip() { printf 'sites.sh: skipped: %s\n' "$*" >&2; exit "$SKIP"; }
die() { printf 'sites.sh: error: %s\n' "$*" >&2; exit 1; }

while (($#)); do
    case "$1" in
        --handoff) (($# >= 2)) || { usage >&2; exit 2; }; handoff_arg=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        --cleanup) mode=cleanup; shift ;;
        -h | --help) usage; exit 0 ;;
        *) printf 'sites.sh: unknown argument: %s\n\n' "$1" >&2; usage >&2; exit 2 ;;
    esac
done

command -v ip >/dev/null 2>&1 || skip "no 'ip' command (install iproute2) to make network namespaces"
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root (run it with sudo)"
ip netns list >/dev/null 2>&1 || skip "'ip netns' does not work here: $(ip netns list 2>&1 | head -n1)"
ns_exists() { ip netns list 2>/dev/null | awk '{ print $1 }' | grep -qx -- "$1"; }

if [ "$mode" = cleanup ]; then
    for ns in "${ALL_NS[@]}"; do
        ns_exists "$ns" || continue
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        # shellcheck disable=SC2086 # one pid a word
        [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
        ip netns del "$ns" && say "removed namespace $ns"
    done
    exit 0
fi
for ns in "${ALL_NS[@]}"; do
    ! ns_exists "$ns" || die "namespace $ns already exists (another run, or one killed?); remove it with: $0 --cleanup"
done

created_ns=() started_pids=() work=""
cleanup() {
    local status=$? pid ns pids
    trap '' INT TERM HUP
    set +e
    for pid in "${started_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    sleep 0.5
    for pid in "${started_pids[@]}"; do kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
    for ns in "${created_ns[@]}"; do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        # shellcheck disable=SC2086 # one pid a word; only processes inside our own namespaces
        [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
        ip netns del "$ns" 2>/dev/null || printf 'sites.sh: could not delete namespace %s\n' "$ns" >&2
    done
    if [ -n "$work" ] && [ -d "$work" ]; then
        if ((keep)); then say "kept $work (logs)"; else rm -rf "$work"; fi
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

link() { local err; err=$("$@" 2>&1) || skip "cannot set up the namespaces' network here ($*: ${err:-failed})"; }
for ns in "${ALL_NS[@]}"; do
    if ! err=$(ip netns add "$ns" 2>&1); then
        ns_exists "$ns" && ip netns del "$ns" 2>/dev/null
        skip "cannot create network namespaces here (ip netns add $ns: ${err:-failed})"
    fi
    created_ns+=("$ns")
    link ip -n "$ns" link set lo up
done
link ip -n "$NS_HUB" link add "$BRIDGE" type bridge
link ip -n "$NS_HUB" addr add "$HUB_IP/$PREFIX_LEN" dev "$BRIDGE"
link ip -n "$NS_HUB" link set "$BRIDGE" up
delayed_by="no delay (this kernel has no netem, and python3 or ethtool is missing for link-emulator.py)"
emulate=0
if ! { command -v tc >/dev/null 2>&1 && tc -n "$NS_HUB" qdisc add dev lo root netem delay 0ms 2>/dev/null; }; then
    command -v python3 >/dev/null 2>&1 && command -v ethtool >/dev/null 2>&1 && emulate=1
fi
tc -n "$NS_HUB" qdisc del dev lo root 2>/dev/null || true
declare -A emulators=()
# The emulated wire of a site's link (its veth in the hub's namespace), 20 ms each way.
start_emulator() {
    ip netns exec "$NS_HUB" python3 "$(dirname "$0")/link-emulator.py" "$1" "emu-${1#veth-}" --delay-ms 20 --loss 0 \
        >/dev/null 2>&1 </dev/null &
    emulators[$1]=$!
    started_pids+=("$!")
}
offloads_off() { ip netns exec "$1" ethtool -K "$2" tx off tso off gso off gro off >/dev/null 2>&1 || true; }
for spec in "$NS_A:10.78.0.2:veth-a" "$NS_B:10.78.0.3:veth-b" "$NS_C:10.78.0.4:veth-c"; do
    IFS=: read -r ns addr port <<<"$spec"
    link ip -n "$NS_HUB" link add "$port" type veth peer name eth0 netns "$ns"
    link ip -n "$ns" addr add "$addr/$PREFIX_LEN" dev eth0
    link ip -n "$ns" link set eth0 up
    if ((emulate)); then
        # No netem: link-emulator.py carries every frame between the site's veth and a second
        # pair whose other end is on the hub's bridge, 20 ms later each way.
        link ip -n "$NS_HUB" link add "emu-${port#veth-}" type veth peer name "br-${port#veth-}"
        link ip -n "$NS_HUB" link set "br-${port#veth-}" master "$BRIDGE" up
        link ip -n "$NS_HUB" link set "emu-${port#veth-}" up
        link ip -n "$NS_HUB" link set "$port" up
        for dev in "$port" "emu-${port#veth-}" "br-${port#veth-}" "$BRIDGE"; do offloads_off "$NS_HUB" "$dev"; done
        offloads_off "$ns" eth0
        start_emulator "$port"
        delayed_by="link-emulator.py (this kernel has no netem): 20 ms each way between a site and the hub, 40 ms between two sites"
    else
        link ip -n "$NS_HUB" link set "$port" master "$BRIDGE" up
        if tc -n "$ns" qdisc add dev eth0 root netem delay 20ms 2>/dev/null; then
            tc -n "$NS_HUB" qdisc add dev "$port" root netem delay 20ms
            delayed_by="tc netem: 20 ms each way between a site and the hub, 40 ms between two sites"
        fi
    fi
done
say "namespaces ${ALL_NS[*]}; $delayed_by"
# A site's link cut (frames dropped both ways, connections left to find out) and back.
cut_link() {
    if ((emulate)); then kill "${emulators[$1]}" 2>/dev/null; wait "${emulators[$1]}" 2>/dev/null || true
    else ip -n "$NS_HUB" link set "$1" down; fi
}
heal_link() { if ((emulate)); then start_emulator "$1"; else ip -n "$NS_HUB" link set "$1" up; fi; }
sleep 0.5
ip netns exec "$NS_A" ping -c 1 -W 2 -q 10.78.0.3 >/dev/null 2>&1 || true
rtt=$(ip netns exec "$NS_A" ping -c 3 -i 0.2 -q 10.78.0.3 2>/dev/null | sed -n 's|.*= [0-9.]*/\([0-9.]*\)/.*|\1|p')
say "round trip between site A and site B: ${rtt:-unknown} ms"

if [ -n "$handoff_arg" ]; then handoff=$handoff_arg
elif command -v handoff >/dev/null 2>&1; then handoff=$(command -v handoff)
elif [ -x .build/release/handoff ]; then handoff=.build/release/handoff
else handoff=$(dirname "$0")/../../.build/release/handoff
fi
[[ -f $handoff && -x $handoff ]] || die "no handoff executable at '$handoff' (swift build -c release --product handoff, or --handoff PATH)"
handoff=$(cd "$(dirname "$handoff")" && pwd)/$(basename "$handoff")
work=$(mktemp -d "${TMPDIR:-/tmp}/handoff-sites.XXXXXX")

start_in() {   # namespace logfile command...
    local ns=$1 log=$2
    shift 2
    ip netns exec "$ns" "$@" >"$log" 2>&1 </dev/null &
    started_pids+=("$!")
}
listening() { [ -n "$(ip netns exec "$1" ss -Hltn "sport = :$2" 2>/dev/null)" ]; }
wait_listening() {   # namespace port name log
    local deadline=$((SECONDS + 20))
    until listening "$1" "$2"; do
        ((SECONDS < deadline)) || { tail -n 20 "$4" >&2; die "$3 did not listen within 20 s"; }
        sleep 0.1
    done
}
fail() { for log in "$work"/*.log; do printf -- '--- %s:\n' "$log" >&2; tail -n 15 "$log" >&2; done; die "$*"; }
# The ids of the activities of TYPE a fresh node at site $1 lists (from its site's broker).
listed() { { ip netns exec "$1" "$handoff" activities --type org.sites. --broker "${LOCAL[@]}" --wait 1 --json --insecure 2>/dev/null |
    grep -o '"id" *: *"[^"]*"' | sed 's/.*"\([^"]*\)"$/\1/' | sort | tr '\n' ' '; } || true; }
counters() { { grep -h "broker counters" "$1" | tail -n 1 | grep -o 'cached=[0-9]*\|upstream-[a-z]*=[0-9]*\|sites-[a-z]*=[0-9]*\|site-loops=[0-9]*\|messages-in=[0-9]*' | tr '\n' ' '; } || true; }

say "hub broker in $NS_HUB ($HUB_FRONTEND, $HUB_BACKEND)"
start_in "$NS_HUB" "$work/hub.log" "$handoff" broker --frontend "tcp://$HUB_IP:5555" --backend "tcp://$HUB_IP:5556" --insecure --stats-interval 1
wait_listening "$NS_HUB" 5556 "the hub" "$work/hub.log"
for site in a b c; do
    ns=hsites-$site
    start_in "$ns" "$work/site-$site.log" "$handoff" broker --frontend "${LOCAL[0]}" --backend "${LOCAL[1]}" \
        --upstream "$HUB_FRONTEND" "$HUB_BACKEND" --insecure --stats-interval 1
    wait_listening "$ns" 5556 "site $site's broker" "$work/site-$site.log"
done
say "site brokers up, each joined to the hub"

# Site B follows the type (a monitor: a node whose interest stays); site C follows another one.
start_in "$NS_B" "$work/monitor-b.log" "$handoff" monitor --broker "${LOCAL[@]}" --type org.sites. --json --insecure
start_in "$NS_C" "$work/monitor-c.log" "$handoff" monitor --broker "${LOCAL[@]}" --type com.other. --json --insecure
sleep 1
start_in "$NS_A" "$work/first.log" "$handoff" advertise --type "$TYPE" --title "first, from site A" --broker "${LOCAL[@]}" --json --insecure
started=$SECONDS
first=""
until [ -n "$first" ]; do
    first=$(listed "$NS_B")
    ((SECONDS - started < 15)) || fail "site B never listed site A's activity"
done
say "site B lists site A's activity: $first"
sleep 1.5
# (Asking at C with `handoff activities` would make C follow the type; its broker's counters say it.)
c_counters=$(counters "$work/site-c.log")
[[ $c_counters == *"cached=0"* && $c_counters == *"upstream-in=0"* ]] || fail "site C's broker took site A's activity in: $c_counters"
if grep -q "$TYPE" "$work/monitor-c.log"; then fail "site C's monitor saw $TYPE"; fi
say "site C (follows com.other.) received none of it: $c_counters"

say "cutting site B's link to the hub"
cut_link veth-b
start_in "$NS_A" "$work/second.log" "$handoff" advertise --type "$TYPE" --title "second, during the cut" --broker "${LOCAL[@]}" --json --insecure
# Longer than a node's presence lease (6 s at the default 2 s interval): what B knew of A lapses.
sleep 8
during=$(listed "$NS_B")
(($(wc -w <<<"$during") < 2)) || fail "during the cut site B lists '$during': it heard of the second activity through a cut link"
say "during the cut site B lists '${during:-nothing}' (what it knew of site A lapses with its lease; the second is not there)"
heal_link veth-b
healed=$SECONDS
both=""
while (($(wc -w <<<"$both") < 2)); do
    both=$(listed "$NS_B")
    ((SECONDS - healed < 15)) || fail "site B did not list both activities within 15 s of the link coming back (lists '$both')"
done
elapsed=$((SECONDS - healed))
say "the link back: site B lists both within ${elapsed} s (each check a fresh node, about 1 s each): $both"
((elapsed <= 3)) || fail "site B took ${elapsed} s to list both activities after the link came back (at most 2 s of bus, plus the check)"

sleep 1.2
for name in hub site-a site-b site-c; do say "$name: $(counters "$work/$name.log")"; done
# The hub sends a site what it follows except what came from there, so each message crosses each
# link between sites at most once: nothing of a site's own comes back to it, nothing goes round.
for name in site-a site-b site-c; do
    line=$(counters "$work/$name.log")
    [[ $line == *"upstream-returned=0"* && $line == *"site-loops=0"* ]] || fail "$name's own messages came back down its link, or went round: $line"
done
hub_line=$(counters "$work/hub.log")
[[ $hub_line == *"sites-in="* && $hub_line != *"sites-out=0 "* ]] || fail "the hub sent nothing down to the sites: $hub_line"
say "no message came back to the site it came from"
say "sites: passed"
