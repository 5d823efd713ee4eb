import ZeroMQ

/// The shell's side of ``UnfinishedMessageBound``, shared by the broker and the node: connections
/// as libzmq's monitors and frames name them, what the kernel says each handed libzmq, and the cut.
extension UnfinishedMessageBound where Peer == [UInt8] {
    /// The connection an `accepted` or `connected` monitor event names (its descriptor), with its
    /// peer as the kernel names it now, while the descriptor surely names it; nothing when it has gone.
    static func opened(_ event: MonitorEvent) -> (descriptor: Int32, peer: [UInt8])? {
        SourceConnection(descriptor: Int32(bitPattern: event.value)).map { ($0.descriptor, $0.peer) }
    }

    /// Starts watching the connection an `accepted` or `connected` event names (``opened(_:)``),
    /// if it is still there.
    mutating func watch(_ event: MonitorEvent) {
        if let connection = Self.opened(event) { watch(connection.descriptor, peer: connection.peer) }
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
