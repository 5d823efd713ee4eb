import CZeroMQ
import Glibc

/// The connection a received frame came in on: its file descriptor (what libzmq's `ZMQ_SRCFD`
/// reports, for every TCP and IPC connection in libzmq 4.3) and the kernel's name for its peer,
/// address and port.
///
/// The descriptor alone names a connection only while it is open: libzmq closes it when the
/// connection goes, and the kernel hands the number to the next one. The peer's address and port
/// tell the two apart, so an owner that keeps something per connection (a broker counting what
/// each subscriber holds) can see that a number now belongs to someone else, and ``cut()`` ends
/// a connection only if it is still the one the frame came in on.
public struct SourceConnection: Hashable, Sendable, CustomStringConvertible {
    /// The connection's file descriptor, owned by libzmq's I/O thread.
    public let descriptor: Int32
    /// The peer's socket address as the kernel gives it (family, address, port); for IPC, the
    /// peer process's id and user, which an unnamed Unix socket address does not tell apart.
    public let peer: [UInt8]

    /// The connection behind `descriptor` now, or `nil` when it is no longer a connected socket.
    public init?(descriptor: Int32) {
        guard descriptor >= 0, let peer = Self.peer(of: descriptor) else { return nil }
        self.descriptor = descriptor
        self.peer = peer
    }

    /// Whether `descriptor` still names this connection (open, and the same peer).
    public var isOpen: Bool { Self.peer(of: descriptor) == peer }

    /// Ends the connection as a failed one would end: `shutdown(2)` on its descriptor, which
    /// libzmq's I/O thread then finds closed, and tears down as a disconnection (the pipe, and
    /// whatever the socket kept for that peer, such as an XPUB's subscriptions). Nothing is done
    /// when the descriptor no longer names this connection. Returns whether it was cut.
    @discardableResult
    public func cut() -> Bool {
        guard isOpen else { return false }
        return shutdown(descriptor, Int32(SHUT_RDWR)) == 0
    }

    /// The peer as ZAP names peers (the IP address; for IPC, the process).
    public var peerAddress: String? { PeerAddress.of(descriptor: descriptor) }

    public var description: String { "connection \(descriptor)" + (peerAddress.map { " from \($0)" } ?? "") }

    /// The kernel's name for the peer of `descriptor` (and, for IPC, the peer's pid, uid and
    /// gid), or `nil` when it is not a connected socket.
    private static func peer(of descriptor: Int32) -> [UInt8]? {
        guard let (storage, length) = PeerAddress.socketName(of: descriptor) else { return nil }
        var name = withUnsafeBytes(of: storage) { Array($0.prefix(Int(length))) }
        if Int32(storage.ss_family) == AF_UNIX, let credentials = PeerAddress.credentials(of: descriptor) {
            name += withUnsafeBytes(of: credentials) { Array($0) }
        }
        return name
    }
}

extension Frame {
    /// The descriptor of the connection this frame came in on (libzmq's `ZMQ_SRCFD`), open or
    /// not by now; `nil` for a frame the socket made itself (an XPUB's withdrawal when a topic's
    /// last subscriber went) or one from an inproc peer. ``SourceConnection/init(descriptor:)``
    /// tells whether it is still open, and whose.
    public var sourceDescriptor: Int32? {
        let descriptor = zmq_msg_get(storage, ZMQ_SRCFD)
        return descriptor < 0 ? nil : descriptor
    }
}
