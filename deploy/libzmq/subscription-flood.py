#!/usr/bin/env python3
"""A subscriber that sends many distinct subscriptions, to show what they cost the socket it sends them to.

libzmq (4.3.x) keeps every distinct subscription of a connection in a trie until the connection
goes, at about 30 bytes of memory per byte of topic, and bounds neither how many nor (but for
ZMQ_MAXMSGSIZE) how long. Handoff cuts off a subscriber whose frame is over 1 KiB
(WireLimits.maxSubscriptionFrame); how many shorter ones a connection holds it cannot bound
(docs/operations.md, "What a subscriber's subscriptions cost"). This peer speaks ZMTP 3.0 by hand
(NULL mechanism: an insecure broker or node; with CURVE only an account member could do the same):

    handoff broker --frontend tcp://127.0.0.1:47001 --backend tcp://127.0.0.1:47002 &
    python3 deploy/libzmq/subscription-flood.py 127.0.0.1 47002 500 60000 $!    # cut off at once
    python3 deploy/libzmq/subscription-flood.py 127.0.0.1 47002 500000 60 $!    # grows the broker

prints the receiver's resident memory before and after, and whether it hung up. On this project's
2-core VM (2026-12-04, libzmq 4.3.4, a debug broker): before the limit, 500 of 60,000 bytes took a
broker from 35 to 951 MiB; 500,000 of 60 bytes take it from 36 to 993 MiB, limit or not.
"""
import os
import socket
import struct
import sys
import time

from zmtp import connect_null, resident


def frame(body):
    """One final ZMTP 3.0 message frame: short below 256 bytes, long above."""
    if len(body) < 256:
        return bytes([0x00, len(body)]) + body
    return bytes([0x02]) + struct.pack(">Q", len(body)) + body


def main():
    host, port, count, length = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    pid = sys.argv[5] if len(sys.argv) > 5 else None
    if pid:
        print("receiver before:", resident(pid))
    peer = connect_null(host, port, "XSUB")
    sent = 0
    try:
        for _ in range(count):
            # A distinct topic each time: a prefix an activity type might have, then random hex.
            peer.sendall(frame(b"\x01A:org.example." + os.urandom(length // 2).hex().encode()))
            sent += 1
        # Whatever the receiver sent (its READY) until it hangs up, or a second of silence.
        peer.settimeout(1)
        while peer.recv(4096):
            pass
        hung_up = True
    except (ConnectionResetError, BrokenPipeError):
        hung_up = True
    except socket.timeout:
        hung_up = False
    print(f"sent {sent} subscriptions of about {length} bytes;", "the receiver hung up" if hung_up else "still connected")
    time.sleep(1)
    if pid:
        print("receiver after:", resident(pid))


if __name__ == "__main__":
    main()
