#!/usr/bin/env python3
"""A lossy, slow wire between two network interfaces, in user space: what `tc qdisc netem` does,
for kernels built without sch_netem (deploy/netns/stream-link.sh uses it when netem is missing).

    link-emulator.py IF_A IF_B [--delay-ms 20] [--loss 0.01] [--seed N]

Every Ethernet frame that arrives on IF_A leaves on IF_B (and back) --delay-ms later, unless it is
dropped, with probability --loss, each way. Order is kept (a constant delay). Runs until SIGTERM or
SIGINT, then prints one line per direction: frames forwarded and dropped.

The interfaces should carry whole frames: turn off segmentation and checksum offloads on the hosts'
ends (ethtool -K DEV tx off tso off gso off gro off), or frames arrive larger than the MTU, or with
their checksums left to hardware that is not there.
"""

import argparse
import collections
import random
import select
import signal
import socket
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4  # a frame this host sent itself (our own forwards): never forwarded back


def open_interface(name):
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    sock.bind((name, 0))
    sock.setblocking(False)
    return sock


class Direction:
    def __init__(self, name, source, target):
        self.name, self.source, self.target = name, source, target
        self.queue = collections.deque()  # (due, frame); a constant delay keeps it sorted
        self.forwarded = self.dropped = self.failed = 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--loss", type=float, default=0.01)
    parser.add_argument("--seed", type=int)
    options = parser.parse_args()
    rng = random.Random(options.seed)
    delay = options.delay_ms / 1000.0

    a, b = open_interface(options.a), open_interface(options.b)
    directions = {a: Direction(f"{options.a}->{options.b}", a, b), b: Direction(f"{options.b}->{options.a}", b, a)}
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    print(f"link-emulator: {options.a} <-> {options.b}, {options.delay_ms:g} ms each way, loss {options.loss:.2%} each way",
          flush=True)

    while not stopping:
        now = time.monotonic()
        due = [d.queue[0][0] for d in directions.values() if d.queue]
        timeout = max(0.0, min(due) - now) if due else 0.5
        try:
            readable, _, _ = select.select([a, b], [], [], timeout)
        except InterruptedError:
            continue
        for sock in readable:
            direction = directions[sock]
            while True:
                try:
                    frame, address = sock.recvfrom(65536)
                except BlockingIOError:
                    break
                if address[2] == PACKET_OUTGOING:
                    continue
                if rng.random() < options.loss:
                    direction.dropped += 1
                    continue
                direction.queue.append((time.monotonic() + delay, frame))
        now = time.monotonic()
        for direction in directions.values():
            while direction.queue and direction.queue[0][0] <= now:
                _, frame = direction.queue.popleft()
                try:
                    direction.target.send(frame)
                    direction.forwarded += 1
                except OSError:  # the link is down (a cut), or the frame is too big: lost, as on a wire
                    direction.failed += 1

    for direction in directions.values():
        print(f"link-emulator: {direction.name}: {direction.forwarded} frames forwarded, {direction.dropped} dropped, "
              f"{direction.failed} failed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
