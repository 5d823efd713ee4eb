# Shared by the scripts in this folder: find the toolchain and install the Debian packages
# Handoff needs when any is missing. Source it; it changes to the repository root.

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The Debian packages Handoff builds and tests with.
HANDOFF_DEBIAN_PACKAGES=(
    pkg-config
    libzmq3-dev          # libzmq 4.3 (CURVE included): the transport
    protobuf-compiler    # protoc: Proto/generate.sh
    libprotobuf-c-dev    # C plugins decode activities with protobuf-c
    protobuf-c-compiler
    gcc make             # the C plugin's plain Makefile
    tcpdump              # the test that no contact crosses loopback in plain text
    iproute2             # deploy/netns: network namespaces, veth pairs, tc shaping
    ethtool iputils-ping python3  # deploy/netns/stream-link.sh's lossy link where the kernel has no netem
    libnats-dev libhiredis-dev    # the benchmark's NATS and Redis baselines use the peers' own C clients
    prometheus           # promtool and the server: MetricsTests and PrometheusTests check /metrics as Prometheus does
    chromium             # LivePageTests load the live page in headless Chromium and read what it rendered
    libx11-dev libxfixes-dev  # the clipboard plugin's X11 side (Plugins/ClipboardX11)
    xvfb xclip           # ClipboardTests: two X displays, and a real X client copying and pasting on them
    sway wl-clipboard    # WaylandClipboardTests: two headless sway compositors, wl-copy and wl-paste on them
    gdb                  # scripts/stacks: a hung test process's threads, read before a pass's time limit ends it
    faketime             # ClockStepTests: an advertiser whose host's clock is shifted (libfaketime)
)

ensure_debian_packages() {
    local missing=() package
    for package in "${HANDOFF_DEBIAN_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$package")
    done
    ((${#missing[@]} == 0)) && return 0
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "==> installing Debian packages: ${missing[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # Only prometheus' promtool is wanted: where systemd runs, the package also starts a Prometheus
    # server, which would scrape in the background while the tests measure latencies.
    if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
        $sudo systemctl disable --now prometheus.service >/dev/null 2>&1 || true
    fi
}

ensure_swift() {
    command -v swift >/dev/null && return 0
    if [ -x /opt/swift/usr/bin/swift ]; then
        export PATH="/opt/swift/usr/bin:$PATH"
        return 0
    fi
    echo "error: no Swift toolchain on PATH (expected Swift 6.2 or later, e.g. at /opt/swift)" >&2
    exit 1
}

ensure_debian_packages
ensure_swift
