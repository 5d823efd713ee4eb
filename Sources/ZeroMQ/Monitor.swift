import CZeroMQ
import Synchronization

/// Kinds of socket event that `zmq_socket_monitor` reports.
public struct MonitorEvents: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let connected = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_CONNECTED))
    public static let connectDelayed = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_CONNECT_DELAYED))
    public static let connectRetried = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_CONNECT_RETRIED))
    public static let listening = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_LISTENING))
    public static let bindFailed = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_BIND_FAILED))
    public static let accepted = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_ACCEPTED))
    public static let acceptFailed = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_ACCEPT_FAILED))
    public static let closed = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_CLOSED))
    public static let closeFailed = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_CLOSE_FAILED))
    public static let disconnected = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_DISCONNECTED))
    public static let monitorStopped = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_MONITOR_STOPPED))
    public static let handshakeFailedNoDetail = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL))
    public static let handshakeSucceeded = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_HANDSHAKE_SUCCEEDED))
    public static let handshakeFailedProtocol = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL))
    public static let handshakeFailedAuth = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_HANDSHAKE_FAILED_AUTH))
    /// Every event above.
    public static let all = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_ALL))

    private static let names: [(MonitorEvents, String)] = [
        (.connected, "connected"), (.connectDelayed, "connectDelayed"), (.connectRetried, "connectRetried"),
        (.listening, "listening"), (.bindFailed, "bindFailed"), (.accepted, "accepted"),
        (.acceptFailed, "acceptFailed"), (.closed, "closed"), (.closeFailed, "closeFailed"),
        (.disconnected, "disconnected"), (.monitorStopped, "monitorStopped"),
        (.handshakeFailedNoDetail, "handshakeFailedNoDetail"), (.handshakeSucceeded, "handshakeSucceeded"),
        (.handshakeFailedProtocol, "handshakeFailedProtocol"), (.handshakeFailedAuth, "handshakeFailedAuth"),
    ]

    public var description: String {
        let known = Self.names.filter { contains($0.0) }.map(\.1)
        return known.count == 1 ? known[0] : "[" + known.joined(separator: ", ") + "]"
    }
}

/// One event that happened to a monitored socket.
public struct MonitorEvent: Hashable, Sendable, CustomStringConvertible {
    /// What happened (exactly one kind).
    public let kind: MonitorEvents
    /// The event's value: a file descriptor for connected/accepted/closed/disconnected, an errno for
    /// failures, a reconnect interval for connectRetried, a ZMTP error code for handshake failures.
    public let value: UInt32
    /// The endpoint the event concerns, e.g. `tcp://127.0.0.1:5555`: for a bound socket, its own
    /// (local) endpoint, whoever the peer is.
    public let endpoint: String
    /// The peer's address (`192.0.2.7`, as ZAP names peers) on a bound socket's `accepted`,
    /// handshake-failure and `disconnected` events, when the monitor watches handshake failures
    /// and could learn it; `nil` otherwise (see ``SocketMonitor``).
    public internal(set) var peerAddress: String?

    public init(kind: MonitorEvents, value: UInt32, endpoint: String, peerAddress: String? = nil) {
        self.kind = kind
        self.value = value
        self.endpoint = endpoint
        self.peerAddress = peerAddress
    }

    public var description: String { "\(kind) \(endpoint) (\(value))" + (peerAddress.map { " from \($0)" } ?? "") }
}

/// Receives the events of one socket, reported by libzmq over an inproc PAIR socket.
///
/// Made by ``Socket/monitor(_:)``; belongs to the monitored socket's owner, like the socket itself.
///
/// A monitor that watches handshake failures also tells who failed (``MonitorEvent/peerAddress``),
/// which libzmq's events do not say on a bound socket: it listens to `accepted` and `disconnected`
/// as well (delivering them only when asked for), asks the kernel for the peer of each accepted
/// connection by its descriptor, and gives a failure the address of the disconnection libzmq
/// reports right after it, from the same call on its I/O thread. A connection that failed before
/// its `accepted` event was read has no address (its descriptor may already be another's).
public final class SocketMonitor {
    /// The PAIR socket libzmq reports events on.
    public let socket: Socket
    private weak var target: Socket?
    /// What the owner asked for; the monitor may listen to more (see above).
    private let requested: MonitorEvents
    /// Whether the monitor learns peers' addresses (it watches handshake failures).
    private let learnsPeers: Bool
    /// The peer of each connection accepted and not yet disconnected, by descriptor.
    private var peers: [UInt32: String] = [:]
    /// Events read but not yet delivered, oldest first.
    private var pending: [MonitorEvent] = []

    /// The events after which libzmq reports a disconnection of the same connection at once.
    private static let handshakeFailures: MonitorEvents = [.handshakeFailedNoDetail, .handshakeFailedProtocol, .handshakeFailedAuth]
    /// How long a handshake failure waits for its disconnection (which libzmq sends right after it).
    private static let disconnectionWait = Duration.milliseconds(100)

    init(target: Socket, events: MonitorEvents) throws(ZMQError) {
        requested = events
        learnsPeers = !events.isDisjoint(with: Self.handshakeFailures)
        let watched = learnsPeers ? events.union([.accepted, .disconnected]) : events
        let endpoint = "inproc://zmq-monitor-\(SocketMonitor.nextID.add(1, ordering: .relaxed).newValue)"
        let handle = try target.open("zmq_socket_monitor")
        try zmqCall("zmq_socket_monitor(\(endpoint))") { zmq_socket_monitor(handle, endpoint, Int32(watched.rawValue)) }
        target.isMonitored = true
        self.target = target
        socket = try target.context.socket(.pair)
        try socket.connect(endpoint)
    }

    private static let nextID = Atomic<UInt64>(0)

    deinit { stop() }

    /// Stops monitoring and closes the PAIR socket. Done automatically on release.
    public func stop() {
        // Detach first: closing the PAIR while libzmq still reports to it can hang the context.
        if let target, target.isMonitored, let handle = try? target.open("zmq_socket_monitor") {
            zmq_socket_monitor(handle, nil, 0)
            target.isMonitored = false
        }
        socket.close()
    }

    /// The next event, blocking the thread until one arrives.
    public func next() throws(ZMQError) -> MonitorEvent {
        while true {
            if pending.isEmpty { pending.append(try Self.decode(try socket.receive(), try socket.receive())) }
            try readReady()
            if let event = deliverFirst() { return event }
        }
    }

    /// The next event, suspending the task; `nil` when none arrives within `timeout`.
    nonisolated(nonsending)
    public func next(timeout: Duration) async throws -> MonitorEvent? {
        let limit = ContinuousClock.now + timeout
        while true {
            if pending.isEmpty {
                // A zero timeout still looks once, without waiting (a poll of what is there).
                let remaining = max(.zero, ContinuousClock.now.duration(to: limit))
                guard let event = try await receive(timeout: remaining) else { return nil }
                pending.append(event)
            }
            try readReady()
            if learnsPeers, pending.count == 1, Self.handshakeFailures.contains(pending[0].kind),
               let following = try await receive(timeout: min(Self.disconnectionWait, max(.zero, ContinuousClock.now.duration(to: limit)))) {
                pending.append(following)
                try readReady()
            }
            if let event = deliverFirst() { return event }
        }
    }

    /// Waits for an event of one of the given kinds, skipping others; `nil` on timeout. A zero
    /// timeout looks through what is already there without waiting.
    nonisolated(nonsending)
    public func next(matching kinds: MonitorEvents, timeout: Duration) async throws -> MonitorEvent? {
        let limit = ContinuousClock.now + timeout
        while true {
            let remaining = max(.zero, ContinuousClock.now.duration(to: limit))
            guard let event = try await next(timeout: remaining) else { return nil }
            if kinds.contains(event.kind) { return event }
        }
    }

    /// One event from libzmq, or `nil` when none arrives within `timeout`.
    nonisolated(nonsending)
    private func receive(timeout: Duration) async throws -> MonitorEvent? {
        guard let header = try await socket.receive(timeout: timeout) else { return nil }
        let address = try await socket.receive()
        return try Self.decode(header, address)
    }

    /// Reads every event already waiting, without blocking: an `accepted` event's descriptor is
    /// asked for its peer only if its disconnection is not among them.
    private func readReady() throws(ZMQError) {
        while let header = try socket.tryReceive() {
            pending.append(try Self.decode(header, try socket.receive()))
        }
    }

    /// Takes the oldest pending event, adds what the monitor knows of its peer, and returns it if
    /// the owner asked for its kind.
    private func deliverFirst() -> MonitorEvent? {
        var event = pending.removeFirst()
        if learnsPeers {
            switch event.kind {
            case .accepted:
                // Closed already (its disconnection is pending): the number may be another's now.
                let closed = pending.contains { $0.kind == .disconnected && $0.value == event.value }
                event.peerAddress = closed ? nil : PeerAddress.of(descriptor: Int32(bitPattern: event.value))
                if let address = event.peerAddress { peers[event.value] = address }
            case .disconnected:
                event.peerAddress = peers.removeValue(forKey: event.value)
            case _ where Self.handshakeFailures.contains(event.kind):
                if let following = pending.first, following.kind == .disconnected { event.peerAddress = peers[following.value] }
            default:
                break
            }
        }
        return requested.contains(event.kind) ? event : nil
    }

    /// Parses the two frames of a ZMQ_EVENT (v1): `uint16 event, uint32 value`, then the endpoint.
    static func decode(_ header: Frame, _ address: Frame) throws(ZMQError) -> MonitorEvent {
        guard header.count == 6, header.hasMore else {
            throw ZMQError(.invalidArgument, operation: "decoding a monitor event of \(header.count) bytes")
        }
        let (kind, value) = header.withUnsafeBytes { bytes in
            (bytes.loadUnaligned(fromByteOffset: 0, as: UInt16.self),
             bytes.loadUnaligned(fromByteOffset: 2, as: UInt32.self))
        }
        return MonitorEvent(
            kind: MonitorEvents(rawValue: UInt32(kind)), value: value, endpoint: address.string ?? "")
    }
}

extension Socket {
    /// Starts reporting this socket's events (connections, disconnections, handshakes) to a monitor.
    ///
    /// - Parameter events: The kinds of event to report.
    /// - Returns: The monitor; keep it with the socket, under the same owner.
    public func monitor(_ events: MonitorEvents = .all) throws(ZMQError) -> SocketMonitor {
        try SocketMonitor(target: self, events: events)
    }
}
