"""What the hand-made ZMTP peers here share: a NULL-mechanism connection, and a process's memory."""
import socket
import struct


def resident(pid):
    """A process's resident memory, as /proc says it (`123456 kB`)."""
    with open(f"/proc/{pid}/status") as status:
        return next(line.split(":")[1].strip() for line in status if line.startswith("VmRSS"))


def connect_null(host, port, socket_type):
    """A TCP connection that has said ZMTP 3.0 hello as a `socket_type` ("PUB", "XSUB") of the
    NULL mechanism: what an insecure broker or node accepts from anyone (with CURVE only an
    account member gets this far)."""
    peer = socket.create_connection((host, port))
    # Greeting: signature, version 3.0, mechanism NULL, as-server 0, filler.
    peer.sendall(b"\xff" + b"\x00" * 8 + b"\x7f" + bytes([3, 0]) + b"NULL" + b"\x00" * 16 + b"\x00" + b"\x00" * 31)
    greeting = b""
    while len(greeting) < 64:
        greeting += peer.recv(64 - len(greeting))
    name = socket_type.encode()
    ready = b"\x05READY" + bytes([11]) + b"Socket-Type" + struct.pack(">I", len(name)) + name
    peer.sendall(bytes([0x04, len(ready)]) + ready)
    return peer
