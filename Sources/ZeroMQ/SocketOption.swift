import CZeroMQ

/// A socket option whose value has the Swift type `Value`.
///
/// ```swift
/// try socket.set(.linger, 0)
/// try socket.set(.subscribe, Array("handoff.adv.".utf8))
/// let endpoint = try socket.get(.lastEndpoint)
/// ```
public struct SocketOption<Value: SocketOptionValue>: Sendable, CustomStringConvertible {
    /// The `ZMQ_*` option number.
    public let rawValue: Int32
    /// The option's libzmq name, for error messages.
    public let name: String
    /// The exact buffer size `zmq_getsockopt` wants for this option, when it is not the type's default.
    public let readCapacity: Int?

    public init(_ rawValue: Int32, name: String, readCapacity: Int? = nil) {
        self.rawValue = rawValue
        self.name = name
        self.readCapacity = readCapacity
    }

    public var description: String { name }
}

/// A Swift type that a socket option can hold.
public protocol SocketOptionValue {
    /// Calls `body` with the value's bytes as libzmq expects them for `zmq_setsockopt`.
    func withOptionBytes<R>(_ body: (UnsafeRawBufferPointer) throws(ZMQError) -> R) throws(ZMQError) -> R
    /// Reads the value back from `zmq_getsockopt`, given a buffer of at most `capacity` bytes.
    static func read(capacity: Int, _ get: (UnsafeMutableRawPointer, inout Int) throws(ZMQError) -> Void) throws(ZMQError) -> Self
    /// The buffer size `read` needs.
    static var optionCapacity: Int { get }
}

extension Int32: SocketOptionValue {
    public func withOptionBytes<R>(_ body: (UnsafeRawBufferPointer) throws(ZMQError) -> R) throws(ZMQError) -> R {
        var value = self
        return try Swift.withUnsafeBytes(of: &value) { (buffer) throws(ZMQError) -> R in try body(buffer) }
    }
    public static func read(capacity: Int, _ get: (UnsafeMutableRawPointer, inout Int) throws(ZMQError) -> Void) throws(ZMQError) -> Int32 {
        var value: Int32 = 0
        var size = MemoryLayout<Int32>.size
        try get(&value, &size)
        return value
    }
    public static var optionCapacity: Int { MemoryLayout<Int32>.size }
}

extension Int64: SocketOptionValue {
    public func withOptionBytes<R>(_ body: (UnsafeRawBufferPointer) throws(ZMQError) -> R) throws(ZMQError) -> R {
        var value = self
        return try Swift.withUnsafeBytes(of: &value) { (buffer) throws(ZMQError) -> R in try body(buffer) }
    }
    public static func read(capacity: Int, _ get: (UnsafeMutableRawPointer, inout Int) throws(ZMQError) -> Void) throws(ZMQError) -> Int64 {
        var value: Int64 = 0
        var size = MemoryLayout<Int64>.size
        try get(&value, &size)
        return value
    }
    public static var optionCapacity: Int { MemoryLayout<Int64>.size }
}

extension Bool: SocketOptionValue {
    public func withOptionBytes<R>(_ body: (UnsafeRawBufferPointer) throws(ZMQError) -> R) throws(ZMQError) -> R {
        try Int32(self ? 1 : 0).withOptionBytes(body)
    }
    public static func read(capacity: Int, _ get: (UnsafeMutableRawPointer, inout Int) throws(ZMQError) -> Void) throws(ZMQError) -> Bool {
        try Int32.read(capacity: capacity, get) != 0
    }
    public static var optionCapacity: Int { MemoryLayout<Int32>.size }
}

/// Binary option values: routing ids, subscriptions, raw 32-byte CURVE keys.
extension Array: SocketOptionValue where Element == UInt8 {
    public func withOptionBytes<R>(_ body: (UnsafeRawBufferPointer) throws(ZMQError) -> R) throws(ZMQError) -> R {
        var result: Result<R, ZMQError>!
        self.withUnsafeBytes { buffer in
            do throws(ZMQError) { result = .success(try body(buffer)) } catch { result = .failure(error) }
        }
        return try result.get()
    }
    public static func read(capacity: Int, _ get: (UnsafeMutableRawPointer, inout Int) throws(ZMQError) -> Void) throws(ZMQError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: capacity)
        var size = capacity
        var failure: ZMQError?
        buffer.withUnsafeMutableBytes { raw in
            do throws(ZMQError) { try get(raw.baseAddress!, &size) } catch { failure = error }
        }
        if let failure { throw failure }
        return Array(buffer.prefix(size))
    }
    public static var optionCapacity: Int { 256 }
}

/// Text option values: endpoints, ZAP domains, Z85-encoded CURVE keys.
extension String: SocketOptionValue {
    public func withOptionBytes<R>(_ body: (UnsafeRawBufferPointer) throws(ZMQError) -> R) throws(ZMQError) -> R {
        try Array(utf8).withOptionBytes(body)
    }
    public static func read(capacity: Int, _ get: (UnsafeMutableRawPointer, inout Int) throws(ZMQError) -> Void) throws(ZMQError) -> String {
        var bytes = try [UInt8].read(capacity: capacity, get)
        // libzmq includes the terminating NUL in string options.
        while bytes.last == 0 { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
    public static var optionCapacity: Int { 1024 }
}

// MARK: - Options

extension SocketOption where Value == Int32 {
    /// Messages queued for sending per peer before sends block or drop (`ZMQ_SNDHWM`). 0: no limit.
    public static var sendHighWaterMark: Self { .init(ZMQ_SNDHWM, name: "ZMQ_SNDHWM") }
    /// Messages queued on receipt per peer (`ZMQ_RCVHWM`). 0: no limit.
    public static var receiveHighWaterMark: Self { .init(ZMQ_RCVHWM, name: "ZMQ_RCVHWM") }
    /// Milliseconds to keep unsent messages after close (`ZMQ_LINGER`); -1 waits forever.
    public static var linger: Self { .init(ZMQ_LINGER, name: "ZMQ_LINGER") }
    /// Milliseconds a blocking receive waits before failing with `wouldBlock` (`ZMQ_RCVTIMEO`); -1: forever.
    public static var receiveTimeout: Self { .init(ZMQ_RCVTIMEO, name: "ZMQ_RCVTIMEO") }
    /// Milliseconds a blocking send waits before failing with `wouldBlock` (`ZMQ_SNDTIMEO`); -1: forever.
    public static var sendTimeout: Self { .init(ZMQ_SNDTIMEO, name: "ZMQ_SNDTIMEO") }
    /// Milliseconds between ZMTP heartbeat PINGs (`ZMQ_HEARTBEAT_IVL`); 0: off.
    public static var heartbeatInterval: Self { .init(ZMQ_HEARTBEAT_IVL, name: "ZMQ_HEARTBEAT_IVL") }
    /// Milliseconds without traffic after a PING before the peer is declared dead (`ZMQ_HEARTBEAT_TIMEOUT`).
    public static var heartbeatTimeout: Self { .init(ZMQ_HEARTBEAT_TIMEOUT, name: "ZMQ_HEARTBEAT_TIMEOUT") }
    /// Milliseconds the peer should wait for traffic before timing us out (`ZMQ_HEARTBEAT_TTL`).
    public static var heartbeatTTL: Self { .init(ZMQ_HEARTBEAT_TTL, name: "ZMQ_HEARTBEAT_TTL") }
    /// Milliseconds before the first reconnection attempt (`ZMQ_RECONNECT_IVL`).
    public static var reconnectInterval: Self { .init(ZMQ_RECONNECT_IVL, name: "ZMQ_RECONNECT_IVL") }
    /// Upper bound of the exponential reconnection back-off, in milliseconds (`ZMQ_RECONNECT_IVL_MAX`).
    public static var reconnectIntervalMax: Self { .init(ZMQ_RECONNECT_IVL_MAX, name: "ZMQ_RECONNECT_IVL_MAX") }
    /// Milliseconds a TCP connect may take before it is given up and tried again
    /// (`ZMQ_CONNECT_TIMEOUT`); 0: the kernel's own timeout (SYN retries, up to minutes).
    public static var connectTimeout: Self { .init(ZMQ_CONNECT_TIMEOUT, name: "ZMQ_CONNECT_TIMEOUT") }
    /// Milliseconds allowed for the ZMTP handshake (`ZMQ_HANDSHAKE_IVL`).
    public static var handshakeInterval: Self { .init(ZMQ_HANDSHAKE_IVL, name: "ZMQ_HANDSHAKE_IVL") }
    /// Pending-connection queue length of a listening socket (`ZMQ_BACKLOG`).
    public static var backlog: Self { .init(ZMQ_BACKLOG, name: "ZMQ_BACKLOG") }
    /// Kernel send buffer size in bytes (`ZMQ_SNDBUF`); -1: OS default.
    public static var sendBufferSize: Self { .init(ZMQ_SNDBUF, name: "ZMQ_SNDBUF") }
    /// Kernel receive buffer size in bytes (`ZMQ_RCVBUF`); -1: OS default.
    public static var receiveBufferSize: Self { .init(ZMQ_RCVBUF, name: "ZMQ_RCVBUF") }
    /// TCP keep-alive: -1 OS default, 0 off, 1 on (`ZMQ_TCP_KEEPALIVE`).
    public static var tcpKeepalive: Self { .init(ZMQ_TCP_KEEPALIVE, name: "ZMQ_TCP_KEEPALIVE") }
    /// The security mechanism in use (`ZMQ_MECHANISM`): 0 NULL, 1 PLAIN, 2 CURVE, 3 GSSAPI.
    public static var mechanism: Self { .init(ZMQ_MECHANISM, name: "ZMQ_MECHANISM") }
    /// The socket's type (`ZMQ_TYPE`).
    public static var type: Self { .init(ZMQ_TYPE, name: "ZMQ_TYPE") }
    /// Pending events, `ZMQ_POLLIN | ZMQ_POLLOUT` (`ZMQ_EVENTS`). Reading it processes pending commands.
    public static var events: Self { .init(ZMQ_EVENTS, name: "ZMQ_EVENTS") }
    /// The file descriptor that signals (edge-triggered) when `events` may have changed (`ZMQ_FD`).
    public static var fileDescriptor: Self { .init(ZMQ_FD, name: "ZMQ_FD") }
}

extension SocketOption where Value == Int64 {
    /// Largest inbound message in bytes; a peer sending more is disconnected (`ZMQ_MAXMSGSIZE`). -1: no limit.
    ///
    /// Values below about 300 bytes break the ZMTP handshake itself.
    public static var maxMessageSize: Self { .init(ZMQ_MAXMSGSIZE, name: "ZMQ_MAXMSGSIZE") }
}

extension SocketOption where Value == Bool {
    /// Whether the last received frame has more frames after it (`ZMQ_RCVMORE`).
    public static var receiveMore: Self { .init(ZMQ_RCVMORE, name: "ZMQ_RCVMORE") }
    /// Queue messages only to completed connections (`ZMQ_IMMEDIATE`).
    public static var immediate: Self { .init(ZMQ_IMMEDIATE, name: "ZMQ_IMMEDIATE") }
    /// Allow IPv6 as well as IPv4 (`ZMQ_IPV6`).
    public static var ipv6: Self { .init(ZMQ_IPV6, name: "ZMQ_IPV6") }
    /// Keep only the last message in each queue (`ZMQ_CONFLATE`).
    public static var conflate: Self { .init(ZMQ_CONFLATE, name: "ZMQ_CONFLATE") }
    /// XPUB: pass every subscription message up, duplicates included (`ZMQ_XPUB_VERBOSE`).
    public static var xpubVerbose: Self { .init(ZMQ_XPUB_VERBOSE, name: "ZMQ_XPUB_VERBOSE") }
    /// XPUB: pass every subscription and unsubscription up (`ZMQ_XPUB_VERBOSER`).
    public static var xpubVerboser: Self { .init(ZMQ_XPUB_VERBOSER, name: "ZMQ_XPUB_VERBOSER") }
    /// XPUB: fail with `wouldBlock` at the high-water mark instead of dropping (`ZMQ_XPUB_NODROP`).
    public static var xpubNoDrop: Self { .init(ZMQ_XPUB_NODROP, name: "ZMQ_XPUB_NODROP") }
    /// XPUB: subscriptions are applied by the application, not automatically (`ZMQ_XPUB_MANUAL`).
    public static var xpubManual: Self { .init(ZMQ_XPUB_MANUAL, name: "ZMQ_XPUB_MANUAL") }
    /// ROUTER: fail with `hostUnreachable` for an unknown routing id instead of dropping (`ZMQ_ROUTER_MANDATORY`).
    public static var routerMandatory: Self { .init(ZMQ_ROUTER_MANDATORY, name: "ZMQ_ROUTER_MANDATORY") }
    /// ROUTER: a new peer with an existing routing id takes it over (`ZMQ_ROUTER_HANDOVER`).
    public static var routerHandover: Self { .init(ZMQ_ROUTER_HANDOVER, name: "ZMQ_ROUTER_HANDOVER") }
    /// Send an empty message to each new peer on connect (`ZMQ_PROBE_ROUTER`).
    public static var probeRouter: Self { .init(ZMQ_PROBE_ROUTER, name: "ZMQ_PROBE_ROUTER") }
    /// REQ: match replies to requests, ignoring stale ones (`ZMQ_REQ_CORRELATE`).
    public static var requestCorrelate: Self { .init(ZMQ_REQ_CORRELATE, name: "ZMQ_REQ_CORRELATE") }
    /// REQ: allow a new request before the reply arrived (`ZMQ_REQ_RELAXED`).
    public static var requestRelaxed: Self { .init(ZMQ_REQ_RELAXED, name: "ZMQ_REQ_RELAXED") }
    /// Act as a CURVE server (`ZMQ_CURVE_SERVER`).
    public static var curveServer: Self { .init(ZMQ_CURVE_SERVER, name: "ZMQ_CURVE_SERVER") }
    /// SUB/XSUB: receive what does *not* match (`ZMQ_INVERT_MATCHING`).
    public static var invertMatching: Self { .init(ZMQ_INVERT_MATCHING, name: "ZMQ_INVERT_MATCHING") }
}

extension SocketOption where Value == [UInt8] {
    /// The routing id this socket presents to ROUTER peers (`ZMQ_ROUTING_ID`), 1–255 bytes.
    public static var routingID: Self { .init(ZMQ_ROUTING_ID, name: "ZMQ_ROUTING_ID") }
    /// ROUTER: the routing id to give the next connection this socket makes (`ZMQ_CONNECT_ROUTING_ID`).
    public static var connectRoutingID: Self { .init(ZMQ_CONNECT_ROUTING_ID, name: "ZMQ_CONNECT_ROUTING_ID") }
    /// SUB: add a topic-prefix subscription; empty subscribes to everything (`ZMQ_SUBSCRIBE`).
    public static var subscribe: Self { .init(ZMQ_SUBSCRIBE, name: "ZMQ_SUBSCRIBE") }
    /// SUB: remove a subscription added earlier (`ZMQ_UNSUBSCRIBE`).
    public static var unsubscribe: Self { .init(ZMQ_UNSUBSCRIBE, name: "ZMQ_UNSUBSCRIBE") }
    /// XPUB: a message sent to every new subscriber (`ZMQ_XPUB_WELCOME_MSG`). The subscriber must
    /// subscribe to it before connecting; libzmq writes it when the XPUB's owner next processes
    /// commands (any receive, send, poll or ``Socket/pendingEvents()``).
    public static var xpubWelcomeMessage: Self { .init(ZMQ_XPUB_WELCOME_MSG, name: "ZMQ_XPUB_WELCOME_MSG") }
}

extension SocketOption where Value == String {
    /// The endpoint the socket last bound, with the port chosen for a `*` (`ZMQ_LAST_ENDPOINT`).
    public static var lastEndpoint: Self { .init(ZMQ_LAST_ENDPOINT, name: "ZMQ_LAST_ENDPOINT") }
    /// The ZAP domain for authentication (`ZMQ_ZAP_DOMAIN`).
    public static var zapDomain: Self { .init(ZMQ_ZAP_DOMAIN, name: "ZMQ_ZAP_DOMAIN") }
    /// This socket's long-term CURVE public key, Z85 (`ZMQ_CURVE_PUBLICKEY`).
    public static var curvePublicKey: Self { .init(ZMQ_CURVE_PUBLICKEY, name: "ZMQ_CURVE_PUBLICKEY", readCapacity: 41) }
    /// This socket's long-term CURVE secret key, Z85 (`ZMQ_CURVE_SECRETKEY`).
    public static var curveSecretKey: Self { .init(ZMQ_CURVE_SECRETKEY, name: "ZMQ_CURVE_SECRETKEY", readCapacity: 41) }
    /// The server's CURVE public key, Z85, set on a client (`ZMQ_CURVE_SERVERKEY`).
    public static var curveServerKey: Self { .init(ZMQ_CURVE_SERVERKEY, name: "ZMQ_CURVE_SERVERKEY", readCapacity: 41) }
    /// Bind the socket's outgoing connections to this local interface (`ZMQ_BINDTODEVICE`).
    public static var bindToDevice: Self { .init(ZMQ_BINDTODEVICE, name: "ZMQ_BINDTODEVICE") }
}
