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
    /// The endpoint the event concerns, e.g. `tcp://127.0.0.1:5555`.
    public let endpoint: String

    public var description: String { "\(kind) \(endpoint) (\(value))" }
}

/// Receives the events of one socket, reported by libzmq over an inproc PAIR socket.
///
/// Made by ``Socket/monitor(_:)``; belongs to the monitored socket's owner, like the socket itself.
public final class SocketMonitor {
    /// The PAIR socket libzmq reports events on.
    public let socket: Socket
    private weak var target: Socket?

    init(target: Socket, events: MonitorEvents) throws(ZMQError) {
        let endpoint = "inproc://zmq-monitor-\(SocketMonitor.nextID.add(1, ordering: .relaxed).newValue)"
        let handle = try target.open("zmq_socket_monitor")
        try zmqCall("zmq_socket_monitor(\(endpoint))") { zmq_socket_monitor(handle, endpoint, Int32(events.rawValue)) }
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
        try Self.decode(try socket.receive(), try socket.receive())
    }

    /// The next event, suspending the task; `nil` when none arrives within `timeout`.
    nonisolated(nonsending)
    public func next(timeout: Duration) async throws -> MonitorEvent? {
        guard let header = try await socket.receive(timeout: timeout) else { return nil }
        let address = try await socket.receive()
        return try Self.decode(header, address)
    }

    /// Waits for an event of one of the given kinds, skipping others; `nil` on timeout.
    nonisolated(nonsending)
    public func next(matching kinds: MonitorEvents, timeout: Duration) async throws -> MonitorEvent? {
        let limit = ContinuousClock.now + timeout
        while true {
            let remaining = ContinuousClock.now.duration(to: limit)
            guard remaining > .zero, let event = try await next(timeout: remaining) else { return nil }
            if kinds.contains(event.kind) { return event }
        }
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
