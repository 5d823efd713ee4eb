import ZeroMQ

/// The shell's side of ``UnfinishedMessageBound``, shared by the broker and the node: connections
/// as libzmq's monitors and frames name them, what the kernel says each handed libzmq, and the cut.
extension UnfinishedMessageBound where Peer == [UInt8] {
    /// A connection an `accepted` or `connected` monitor event named: its descriptor, its peer as
    /// the kernel names it, and what it had handed libzmq when the event was read (`nil` for IPC).
    struct Opened: Sendable {
        var descriptor: Int32
        var peer: [UInt8]
        var handed: Int?
    }

    /// The connection an `accepted` or `connected` monitor event names, read while the descriptor
    /// surely names it; nothing when it has gone.
    static func opened(_ event: MonitorEvent) -> Opened? {
        SourceConnection(descriptor: Int32(bitPattern: event.value)).map {
            Opened(descriptor: $0.descriptor, peer: $0.peer, handed: SourceConnection.bytesRead(descriptor: $0.descriptor))
        }
    }

    /// Starts watching a connection ``opened(_:)`` named, counted from what it had handed libzmq then.
    mutating func watch(_ connection: Opened) {
        watch(connection.descriptor, peer: connection.peer, handed: connection.handed)
    }

    /// Starts watching the connection an `accepted` or `connected` event names (``opened(_:)``),
    /// if it is still there.
    mutating func watch(_ event: MonitorEvent) {
        if let connection = Self.opened(event) { watch(connection) }
    }

    /// A connection cut for an unfinished message: its peer's address as ZAP names it (asked
    /// before the cut: a socket shut down has no peer) and what it handed libzmq since it last
    /// delivered a whole message.
    struct Cut {
        var address: String?
        var bytes: Int
    }

    /// ``checkIfDue(now:read:)`` with the kernel's counts (``SourceConnection/bytesRead(descriptor:)``), and the
    /// connections past the bound cut (`shutdown(2)`), each only if its descriptor still names the
    /// peer watched; returns those cut, for the owner to count and log.
    mutating func cutIfDue(now: ContinuousClock.Instant) -> [Cut] {
        checkIfDue(now: now) { descriptor, _ in SourceConnection.bytesRead(descriptor: descriptor) }.compactMap { unfinished in
            guard let open = SourceConnection(descriptor: unfinished.descriptor), open.peer == unfinished.peer else { return nil }
            let address = open.peerAddress
            return open.cut() ? Cut(address: address, bytes: unfinished.bytes) : nil
        }
    }
}
