#!/usr/bin/env python3
"""A peer that starts a multipart message and never ends it, to show what it costs a receiver.

libzmq (4.3.x) hands a multipart message to the application only once its last frame arrived,
holds the frames received until then in the connection's pipe, and counts its high-water marks
in whole messages; ZMQ_MAXMSGSIZE limits each frame, not the message. libzmq's own senders hold
an unfinished message on their side, so this peer speaks ZMTP 3.0 by hand (NULL mechanism: an
insecure broker or node; with CURVE only an account member could do the same):

    handoff broker --frontend tcp://127.0.0.1:47001 --backend tcp://127.0.0.1:47002 &
    python3 deploy/libzmq/endless-message.py 127.0.0.1 47001 6 $!

prints the receiver's resident memory before and after. On this project's 2-core VM
(2026-12-03, libzmq 4.3.4) a broker grew from 36 MiB to 2.3 GiB in 6 s. No socket option
bounds it; the deploy/systemd units set MemoryMax so that it costs a restart, not the host.
"""
import struct
import sys
import time

from zmtp import connect_null, resident



def main():
    host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    pid = sys.argv[4] if len(sys.argv) > 4 else None
    if pid:
        print("receiver before:", resident(pid))
    peer = connect_null(host, port, "PUB")
    frame = b"x" * 60_000
    peer.sendall(bytes([0x01, 10]) + b"A:org.test")  # the topic, MORE set
    header = bytes([0x03]) + struct.pack(">Q", len(frame))  # MORE and LONG, forever
    sent, deadline = 0, time.time() + seconds
    while time.time() < deadline:
        peer.sendall(header + frame)
        sent += 1
    print(f"sent {sent} frames ({sent * len(frame) // 1_000_000} MB) of one message, never ended")
    time.sleep(1)
    if pid:
        print("receiver after:", resident(pid))


if __name__ == "__main__":
    main()
