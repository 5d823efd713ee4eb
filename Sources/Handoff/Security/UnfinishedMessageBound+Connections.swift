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

    /// Starts watching a connection ``opened(_:)`` named, reaching the owner through `source`
    /// (``watch(_:peer:source:queueAllowance:handed:)``), counted from what it had handed libzmq then.
    mutating func watch(_ connection: Opened, source: Int, queueAllowance: Int) {
        watch(connection.descriptor, peer: connection.peer, source: source, queueAllowance: queueAllowance, handed: connection.handed)
    }

    /// The number a socket goes by as a source.
    static func source(_ socket: Socket) -> Int { Int(bitPattern: ObjectIdentifier(socket)) }

    /// What `socket`'s queue may hold whole for one connection, from its options: its receive
    /// high-water mark in messages of up to three frames (a ROUTER's identity, an envelope and a
    /// chunk) of its largest frame (``queueAllowance(highWaterMark:frames:largestFrame:)``).
    static func queueAllowance(of socket: Socket) -> Int {
        let highWaterMark = (try? socket.get(.receiveHighWaterMark)) ?? 0
        // No limit (-1), or none known: as large as the bound on allowances lets a frame be.
        let largest = (try? socket.get(.maxMessageSize)).flatMap { $0 < 0 ? nil : Int(clamping: $0) } ?? Int.max
        return queueAllowance(highWaterMark: highWaterMark, frames: 3, largestFrame: largest)
    }

    /// Starts watching the connection an `accepted` or `connected` event of `socket`'s monitor
    /// names (``opened(_:)``), if it is still there, with what `socket`'s queue may hold of it
    /// whole (``queueAllowance(of:)``).
    mutating func watch(_ event: MonitorEvent, on socket: Socket) {
        if let connection = Self.opened(event) {
            watch(connection, source: Self.source(socket), queueAllowance: Self.queueAllowance(of: socket))
        }
    }

    /// A connection cut for an unfinished message: its peer's address as ZAP names it (asked
    /// before the cut: a socket shut down has no peer) and what it handed libzmq since it last
    /// delivered a whole message.
    struct Cut {
        var address: String?
        var bytes: Int
    }

    /// ``checkIfDue(now:read:emptiness:)`` with the kernel's counts
    /// (``SourceConnection/bytesRead(descriptor:)``) and how `sockets` stand (those
    /// the connections reach the owner through, by ``source(_:)``), and the connections past the
    /// bound cut (`shutdown(2)`), each only if its descriptor still names the peer watched; returns
    /// those cut, for the owner to count and log.
    mutating func cutIfDue(now: ContinuousClock.Instant, sockets: [Socket]) -> [Cut] {
        var bySource: [Int: Socket]?
        return checkIfDue(now: now, read: { descriptor, _ in SourceConnection.bytesRead(descriptor: descriptor) }, emptiness: { source in
            if bySource == nil { bySource = Dictionary(sockets.map { (Self.source($0), $0) }, uniquingKeysWith: { first, _ in first }) }
            // Read here, on the owner's isolation: an owner waiting on the socket with nothing to
            // read makes no empty receive of its own. The reading wakes a waiter it satisfies.
            return bySource?[source].map { socket in
                let readable = (try? socket.pendingEvents())?.contains(.readable) ?? true
                return SourceEmptiness(emptyReceives: socket.emptyReceives, foundEmptyNow: !readable)
            }
        }).compactMap { unfinished in
            guard let open = SourceConnection(descriptor: unfinished.descriptor), open.peer == unfinished.peer else { return nil }
            let address = open.peerAddress
            return open.cut() ? Cut(address: address, bytes: unfinished.bytes) : nil
        }
    }
}
