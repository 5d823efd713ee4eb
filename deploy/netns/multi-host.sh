#!/usr/bin/env bash
# A multi-host Handoff deployment on one machine, with Linux network namespaces.
#
#   sudo deploy/netns/multi-host.sh [--handoff PATH] [--plugins DIR]... [--keep] [--timeout SECONDS]
#   sudo deploy/netns/multi-host.sh --network-only     # only check that the namespaces work here
#   sudo deploy/netns/multi-host.sh --cleanup          # remove namespaces left by a killed run
#
# Three namespaces stand for three hosts, joined by a bridge that lives inside the broker's
# namespace (nothing is added to the host's own network namespace):
#
#   handoff-broker  10.77.0.1   handoff broker    frontend :5555, backend :5556
#   handoff-a       10.77.0.2   handoff agent     agent-a, continuation :5560
#   handoff-b       10.77.0.3   handoff agent     agent-b, continuation :5560
#
# The agents get their configuration, data folders, control sockets and logs in a temporary
# folder. Then a short scenario runs across the namespaces: contacts are added on agent-a and
# shared; agent-b sees the activities through the broker, continues them (the contact list comes
# over a continuation stream from 10.77.0.2); every process's /healthz and /metrics are checked,
# agent-b's link to the broker is cut and restored (503, then 200); and agent-a is stopped with
# SIGTERM, which withdraws its activities. Everything (processes, namespaces, links, the temporary folder) is removed on
# exit, on error and on Ctrl-C.
#
# --handoff PATH   the handoff executable (default: `handoff` on PATH, else .build/release/handoff
#                  in the current folder or in this repository)
# --plugins DIR    a plugin folder (repeatable; default: DIR/../lib/handoff/plugins next to the
#                  executable if it exists, else the executable's own folder, as in .build/release)
# --keep           keep the temporary folder (configurations, data, logs) and print its path
# --timeout S      how long to wait for the broker and each agent to come up (default 20)
#
# Exit status: 0 the scenario worked; 1 it did not (the logs are printed); 2 bad usage;
# 77 skipped: network namespaces are not available here (not root, no `ip`, or the kernel or a
# sandbox refuses them).

set -euo pipefail

readonly SKIP=77
readonly NS_BROKER=handoff-broker NS_A=handoff-a NS_B=handoff-b
readonly ALL_NS=("$NS_BROKER" "$NS_A" "$NS_B")
readonly BROKER_IP=10.77.0.1 A_IP=10.77.0.2 B_IP=10.77.0.3 PREFIX_LEN=24
readonly FRONTEND_PORT=5555 BACKEND_PORT=5556 CONTINUATION_PORT=5560 METRICS_PORT=9464
readonly BRIDGE=hbr0
readonly FRONTEND="tcp://$BROKER_IP:$FRONTEND_PORT" BACKEND="tcp://$BROKER_IP:$BACKEND_PORT"
readonly CONTACTS_LIST=org.handoff.contacts.list-contacts CONTACTS_EDIT=org.handoff.contacts.edit-contact

handoff_arg="" keep=0 timeout=20 mode=scenario
plugin_dirs=()

usage() { sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$0"; }
say() { printf '==> %s\n' "$*"; }
skip() { printf 'multi-host.sh: skipped: %s\n' "$*" >&2; exit "$SKIP"; }
die() { printf 'multi-host.sh: error: %s\n' "$*" >&2; exit 1; }

while (($#)); do
    case "$1" in
        --handoff) (($# >= 2)) || { usage >&2; exit 2; }; handoff_arg=$2; shift 2 ;;
        --plugins) (($# >= 2)) || { usage >&2; exit 2; }; plugin_dirs+=("$2"); shift 2 ;;
        --keep) keep=1; shift ;;
        --timeout) [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || { usage >&2; exit 2; }; timeout=$2; shift 2 ;;
        --network-only) mode=network; shift ;;
        --cleanup) mode=cleanup; shift ;;
        -h | --help) usage; exit 0 ;;
        *) printf 'multi-host.sh: unknown argument: %s\n\n' "$1" >&2; usage >&2; exit 2 ;;
    esac
done

# --- What this machine allows ----------------------------------------------------------------

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
    ! ns_exists "$ns" ||
        die "namespace $ns already exists (another run, or one killed with SIGKILL?); remove it with: $0 --cleanup"
done

# --- Tear-down: from here on, every exit goes through cleanup ----------------------------------

created_ns=()      # namespaces this run made, and only those are deleted
started_pids=()    # processes this run started (each the handoff process itself: ip netns exec execs)
work=""

stop_process() {   # pid: SIGTERM, then SIGKILL after 10 s
    local pid=$1 waited=0
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    while kill -0 "$pid" 2>/dev/null && ((waited < 100)); do sleep 0.1; waited=$((waited + 1)); done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local status=$? pid ns pids
    trap '' INT TERM HUP       # finish tearing down even if Ctrl-C is pressed again
    set +e
    for pid in "${started_pids[@]}"; do stop_process "$pid"; done
    for ns in "${created_ns[@]}"; do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        # shellcheck disable=SC2086 # one pid a word; only processes inside our own namespaces
        [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
        ip netns del "$ns" 2>/dev/null || printf 'multi-host.sh: could not delete namespace %s\n' "$ns" >&2
    done
    if [ -n "$work" ] && [ -d "$work" ]; then
        if ((keep)); then say "kept $work (configurations, data, logs)"; else rm -rf "$work"; fi
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# --- Namespaces and links ---------------------------------------------------------------------

say "network namespaces ${ALL_NS[*]} on $BROKER_IP/$PREFIX_LEN"
link() {   # an ip command that sets up the network; its failure means this machine does not allow it
    local err
    err=$("$@" 2>&1) || skip "cannot set up the namespaces' network here ($*: ${err:-failed})"
}
for ns in "${ALL_NS[@]}"; do
    if ! err=$(ip netns add "$ns" 2>&1); then
        ns_exists "$ns" && ip netns del "$ns" 2>/dev/null   # never leave a half-made one behind
        skip "cannot create network namespaces here (ip netns add $ns: ${err:-failed})"
    fi
    created_ns+=("$ns")
    link ip -n "$ns" link set lo up
done

# A bridge inside the broker's namespace, and one veth pair per agent namespace: the agent's end
# is its eth0, the other end is a port of the bridge. Deleting the namespaces deletes them all.
link ip -n "$NS_BROKER" link add "$BRIDGE" type bridge
link ip -n "$NS_BROKER" addr add "$BROKER_IP/$PREFIX_LEN" dev "$BRIDGE"
link ip -n "$NS_BROKER" link set "$BRIDGE" up
for pair in "$NS_A:$A_IP:veth-a" "$NS_B:$B_IP:veth-b"; do
    IFS=: read -r ns addr port <<<"$pair"
    link ip -n "$NS_BROKER" link add "$port" type veth peer name eth0 netns "$ns"
    link ip -n "$NS_BROKER" link set "$port" master "$BRIDGE" up
    link ip -n "$ns" addr add "$addr/$PREFIX_LEN" dev eth0
    link ip -n "$ns" link set eth0 up
done
ip -n "$NS_A" -br addr show dev eth0 | sed 's/^/    handoff-a       /'
ip -n "$NS_B" -br addr show dev eth0 | sed 's/^/    handoff-b       /'
ip -n "$NS_BROKER" -br addr show dev "$BRIDGE" | sed 's/^/    handoff-broker  /'

if [ "$mode" = network ]; then
    if command -v ping >/dev/null 2>&1; then
        for route in "$NS_A:$BROKER_IP" "$NS_B:$BROKER_IP" "$NS_A:$B_IP" "$NS_B:$A_IP"; do
            ns=${route%%:*} to=${route#*:}
            if ip netns exec "$ns" ping -c 1 -W 2 "$to" >/dev/null 2>&1; then
                say "ping $ns -> $to: ok"
            else
                die "ping $ns -> $to failed: the namespaces were made but cannot reach each other"
            fi
        done
    else
        say "no ping here: links made, reachability not checked"
    fi
    say "network namespaces work here; removing them"
    exit 0
fi

# --- The handoff executable and its plugins --------------------------------------------------

if [ -n "$handoff_arg" ]; then
    handoff=$handoff_arg
elif command -v handoff >/dev/null 2>&1; then
    handoff=$(command -v handoff)
elif [ -x .build/release/handoff ]; then
    handoff=.build/release/handoff
else
    handoff=$(dirname "$0")/../../.build/release/handoff   # the repository's, from anywhere
fi
[[ -f $handoff && -x $handoff ]] ||
    die "no handoff executable at '$handoff' (build it: swift build -c release --product handoff; or pass --handoff PATH)"
handoff=$(cd "$(dirname "$handoff")" && pwd)/$(basename "$handoff")   # absolute: it runs in other namespaces
if ((${#plugin_dirs[@]} == 0)); then
    bin_dir=$(dirname "$handoff")
    if [ -d "$bin_dir/../lib/handoff/plugins" ]; then
        plugin_dirs=("$(cd "$bin_dir/../lib/handoff/plugins" && pwd)")
    else
        plugin_dirs=("$bin_dir")
    fi
fi
for i in "${!plugin_dirs[@]}"; do
    [ -d "${plugin_dirs[$i]}" ] || die "plugin folder '${plugin_dirs[$i]}' does not exist"
    plugin_dirs[i]=$(cd "${plugin_dirs[$i]}" && pwd)
done
compgen -G "${plugin_dirs[0]}/*.so" >/dev/null ||
    printf 'multi-host.sh: warning: no *.so in %s: the contacts plugin will be missing\n' "${plugin_dirs[0]}" >&2

# --- Broker and agents ------------------------------------------------------------------------

work=$(mktemp -d "${TMPDIR:-/tmp}/handoff-netns.XXXXXX")

# The account, as a deployment makes it: a CURVE key pair each (`handoff keygen`) for the broker, both
# agents and an observer (the `activities` command below); their .pub files together in one folder,
# which each process takes as its allow-list. Every socket runs CURVE, as it must beyond loopback.
# A stranger's key pair lives elsewhere: it knows the broker's public key, but is not in the account.
account=$work/account
for name in broker agent-a agent-b observer; do
    "$handoff" keygen "$name" --out "$account" >/dev/null || die "handoff keygen $name failed"
done
"$handoff" keygen stranger --out "$work/stranger" >/dev/null || die "handoff keygen stranger failed"
say "account: CURVE keys for broker, agent-a, agent-b and observer in $account"

start_in() {   # namespace logfile command...: runs it in the background, in the namespace
    local ns=$1 log=$2
    shift 2
    ip netns exec "$ns" "$@" >"$log" 2>&1 </dev/null &
    started_pids+=("$!")
}

show_log() {   # name logfile
    printf -- '--- %s (%s), last lines:\n' "$1" "$2" >&2
    tail -n 30 "$2" >&2 || true
}

listening() {   # namespace port
    [ -n "$(ip netns exec "$1" ss -Hltn "sport = :$2" 2>/dev/null)" ]
}

json_string() {   # a JSON string literal
    local s=${1//\\/\\\\}
    s=${s//\"/\\\"}
    printf '"%s"' "$s"
}

say "broker in $NS_BROKER: frontend tcp://*:$FRONTEND_PORT, backend tcp://*:$BACKEND_PORT"
start_in "$NS_BROKER" "$work/broker.log" \
    "$handoff" broker --frontend "tcp://*:$FRONTEND_PORT" --backend "tcp://*:$BACKEND_PORT" --key "$account/broker.key" --log-level info \
    --metrics "127.0.0.1:$METRICS_PORT"
broker_pid=${started_pids[-1]}
deadline=$((SECONDS + timeout))
until listening "$NS_BROKER" "$FRONTEND_PORT" && listening "$NS_BROKER" "$BACKEND_PORT"; do
    kill -0 "$broker_pid" 2>/dev/null || { show_log broker "$work/broker.log"; die "the broker exited"; }
    ((SECONDS < deadline)) || { show_log broker "$work/broker.log"; die "the broker did not listen within ${timeout}s"; }
    sleep 0.2
done

# Each agent gets a configuration file, as deployed (deploy/config/agent.example.json).
plugins_json=""
for dir in "${plugin_dirs[@]}"; do plugins_json+="${plugins_json:+, }$(json_string "$dir")"; done
declare -A agent_pid agent_control
for spec in "a:$NS_A:$A_IP" "b:$NS_B:$B_IP"; do
    IFS=: read -r id ns addr <<<"$spec"
    name=agent-$id
    mkdir -p "$work/$name/data"
    agent_control[$id]="ipc://$work/$name/agent.sock"
    cat >"$work/$name/agent.json" <<EOF
{
  "name": "$name",
  "broker": { "frontend": "$FRONTEND", "backend": "$BACKEND" },
  "plugins": [$plugins_json],
  "data": $(json_string "$work/$name/data"),
  "control": $(json_string "${agent_control[$id]}"),
  "continuation": "tcp://0.0.0.0:$CONTINUATION_PORT",
  "advertisedHost": "$addr",
  "advertiseIntervalSeconds": 2,
  "logLevel": "info",
  "metrics": "127.0.0.1:$METRICS_PORT",
  "security": { "key": $(json_string "$account/$name.key") }
}
EOF
    say "$name in $ns: $handoff agent --config $work/$name/agent.json"
    start_in "$ns" "$work/$name/agent.log" "$handoff" agent --config "$work/$name/agent.json"
    agent_pid[$id]=${started_pids[-1]}
done

# handoff in an agent's namespace, talking to that agent over its control socket. A command that
# gets no answer is ended after call_timeout seconds.
call_timeout=15
on() {   # a|b command arguments...
    local id=$1 ns
    shift
    if [ "$id" = a ]; then ns=$NS_A; else ns=$NS_B; fi
    timeout --foreground "$call_timeout" ip netns exec "$ns" "$handoff" "$@" --agent "${agent_control[$id]}"
}

# An agent is up when its control socket answers (`handoff plugins list --agent`), and this
# scenario needs its contacts plugin.
for id in a b; do
    socket=${agent_control[$id]#ipc://}
    deadline=$((SECONDS + timeout))
    until [ -S "$socket" ] && plugins=$(call_timeout=3 on "$id" plugins list 2>&1); do
        kill -0 "${agent_pid[$id]}" 2>/dev/null ||
            { show_log "agent-$id" "$work/agent-$id/agent.log"; die "agent-$id exited"; }
        ((SECONDS < deadline)) ||
            { show_log "agent-$id" "$work/agent-$id/agent.log"; die "agent-$id did not answer on ${agent_control[$id]} within ${timeout}s"; }
        sleep 0.3
    done
    say "agent-$id answers on ${agent_control[$id]}: plugins $(awk '/^[^ \t]/ { printf "%s%s", sep, $1; sep = ", " }' <<<"$plugins")"
    grep -q '^contacts' <<<"$plugins" || {
        show_log "agent-$id" "$work/agent-$id/agent.log"
        die "agent-$id has no contacts plugin (looked in: ${plugin_dirs[*]}); pass --plugins DIR"
    }
done

# --- The scenario -----------------------------------------------------------------------------

failures=0 results=() out=""
check() {   # description command...: records ok or FAIL
    local what=$1
    shift
    if "$@"; then results+=("ok    $what"); else results+=("FAIL  $what"); failures=$((failures + 1)); fi
}
poll() {   # seconds command...: runs it (in this shell) until it succeeds
    local until=$((SECONDS + $1))
    shift
    until "$@"; do
        ((SECONDS < until)) || return 1
        sleep 0.5
    done
}
contains() { grep -q -- "$2" <<<"$1"; }
show() { printf '%s\n' "${out:-(nothing)}" | sed 's/^/    /'; }
must() {   # command...: prints its output; a failure ends the run, with the logs
    if out=$("$@" 2>&1); then
        show
    else
        show
        show_log broker "$work/broker.log"
        show_log agent-a "$work/agent-a/agent.log"
        show_log agent-b "$work/agent-b/agent.log"
        die "failed on agent-$2: handoff ${*:3}"
    fi
}

say "agent-a: two contacts"
must on a contacts add Ada Lovelace +442079460000 ada@example.org
ada=$(awk 'NF { id = $NF } END { print id }' <<<"$out")   # add prints the new contact's id
must on a contacts add Grace Hopper +12025550100 grace@example.org
must on a contacts list

say "agent-a: share the list (list-contacts) and edit $ada (edit-contact)"
must on a contacts share
must on a contacts edit "$ada"

# Another process in agent-b's namespace, on the bus through the broker's namespace.
activities() {   # [key options...]: the observer's key unless others are given
    local keys=("$@")
    ((${#keys[@]})) || keys=(--key "$account/observer.key")
    out=$(timeout --foreground "$call_timeout" ip netns exec "$NS_B" \
        "$handoff" activities --broker "$FRONTEND" "$BACKEND" "${keys[@]}" --log-level warning 2>&1)
}
sees_a() { activities; contains "$out" "$CONTACTS_LIST" && contains "$out" "$CONTACTS_EDIT"; }
say "from $NS_B: handoff activities --broker $FRONTEND $BACKEND --key $account/observer.key"
check "agent-b's namespace sees agent-a's two activities through the broker" poll 10 sees_a
show
stranger_is_refused() {   # refused at the handshake, and told so: a failure naming the reason, no activities
    ! activities --key "$work/stranger/stranger.key" --account "$work/stranger" --broker-key "$account/broker.pub" &&
        contains "$out" "refused this node's key" && ! contains "$out" "$CONTACTS_LIST"
}
say "from $NS_B, with a key outside the account: handoff activities ... --key $work/stranger/stranger.key"
check "a key outside the account is refused by the broker, and told so" stranger_is_refused
show

if "$handoff" continue --help >/dev/null 2>&1; then
    continue_type() { out=$(on b continue --type "$1" 2>&1); }
    has_contacts() { out=$(on b contacts list 2>&1) && contains "$out" Lovelace && contains "$out" Hopper; }
    has_draft() { out=$(on b contacts draft 2>&1) && contains "$out" Lovelace; }

    say "agent-b: continue $CONTACTS_LIST (the list streams from $A_IP:$CONTINUATION_PORT)"
    check "agent-b continued $CONTACTS_LIST" poll 10 continue_type "$CONTACTS_LIST"
    show
    check "agent-b received agent-a's contacts over a continuation stream" poll 5 has_contacts
    show

    say "agent-b: continue $CONTACTS_EDIT"
    check "agent-b continued $CONTACTS_EDIT" poll 10 continue_type "$CONTACTS_EDIT"
    show
    check "agent-b restored agent-a's draft of $ada" poll 5 has_draft
    show
else
    results+=("skip  continuation: this handoff has no 'continue' command")
fi

# Operators' view: every process serves metrics and /healthz on its own host's loopback. agent-b
# is cut off from the broker (its link down, no FIN: only silence tells), then reconnected.
health() {   # namespace: `handoff health` there
    out=$(timeout --foreground "$call_timeout" ip netns exec "$1" "$handoff" health "127.0.0.1:$METRICS_PORT" 2>&1)
}
unhealthy() { ! health "$1" && contains "$out" unavailable; }
scrape() {   # namespace sample: the sample's value from /metrics there (0 when absent)
    ip netns exec "$1" python3 - "$METRICS_PORT" "$2" <<'PY'
import sys, urllib.request
body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5).read().decode()
values = [line.rsplit(" ", 1)[1] for line in body.splitlines() if line.rsplit(" ", 1)[0] == sys.argv[2]]
print(float(values[0]) if values else 0)
PY
}
counted() {   # namespace sample: the sample is above zero
    out=$(scrape "$1" "$2" 2>&1) && awk -v v="$out" 'BEGIN { exit !(v > 0) }'
}
say "operators: handoff health and /metrics in each namespace"
check "the broker's /healthz is 200" health "$NS_BROKER"
show
check "agent-b's /healthz is 200 (its presence comes back through the broker)" poll 10 health "$NS_B"
show
check "the broker counted the bus traffic (handoff_broker_messages_total, frontend in)" \
    counted "$NS_BROKER" 'handoff_broker_messages_total{socket="frontend",direction="in"}'
check "agent-a counted its answered continuations" \
    counted "$NS_A" 'handoff_node_continuations_answered_total{result="restored"}'
check "agent-b counted the bytes streamed to it" counted "$NS_B" 'handoff_node_stream_bytes_total{direction="in"}'
say "agent-b's link down (ip -n $NS_BROKER link set veth-b down)"
ip -n "$NS_BROKER" link set veth-b down
check "agent-b's /healthz is 503 while its link is down" poll 15 unhealthy "$NS_B"
show
ip -n "$NS_BROKER" link set veth-b up
say "agent-b's link up again"
check "agent-b's /healthz is 200 again once its link is back" poll 20 health "$NS_B"
show

say "agent-a: SIGTERM (it withdraws its activities and exits 0)"
kill -TERM "${agent_pid[a]}"
waited=0
while kill -0 "${agent_pid[a]}" 2>/dev/null && ((waited < 300)); do sleep 0.1; waited=$((waited + 1)); done
if kill -0 "${agent_pid[a]}" 2>/dev/null; then
    kill -KILL "${agent_pid[a]}"
    wait "${agent_pid[a]}" 2>/dev/null || true
    status="still running after 30 s: killed"
else
    status=0
    wait "${agent_pid[a]}" || status=$?
fi
printf '    agent-a exited with status %s\n' "$status"
check "agent-a exited 0 on SIGTERM" test "$status" = 0
withdrawn() { activities && ! contains "$out" "$CONTACTS_LIST" && ! contains "$out" "$CONTACTS_EDIT"; }
check "agent-a's activities were withdrawn from the bus" poll 5 withdrawn
show

echo
say "results"
printf '    %s\n' "${results[@]}"
if ((failures)); then
    show_log broker "$work/broker.log"
    show_log agent-a "$work/agent-a/agent.log"
    show_log agent-b "$work/agent-b/agent.log"
    exit 1
fi
say "the multi-host scenario worked"
