import CZeroMQ
import Foundation

/// What a socket is ready for, or what to wait for: `ZMQ_POLLIN`, `ZMQ_POLLOUT`, `ZMQ_POLLERR`.
public struct PollEvents: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int16
    public init(rawValue: Int16) { self.rawValue = rawValue }

    /// A message can be received without blocking.
    public static let readable = PollEvents(rawValue: Int16(ZMQ_POLLIN))
    /// A message can be sent without blocking.
    public static let writable = PollEvents(rawValue: Int16(ZMQ_POLLOUT))
    /// An error condition (plain file descriptors only).
    public static let error = PollEvents(rawValue: Int16(ZMQ_POLLERR))

    public var description: String {
        var names: [String] = []
        if contains(.readable) { names.append("readable") }
        if contains(.writable) { names.append("writable") }
        if contains(.error) { names.append("error") }
        return "[" + names.joined(separator: ", ") + "]"
    }
}

/// A ZeroMQ socket.
///
/// libzmq sockets are not thread-safe, so a `Socket` is not `Sendable`: it has exactly one owner —
/// a thread, an actor, or a task — and only that owner uses it. Its `async` methods run on the
/// caller's own isolation (`nonisolated(nonsending)`), so an actor can keep a socket as stored state
/// and `await` on it without the socket ever leaving the actor.
///
/// Three ways to send and receive, for three kinds of owner:
/// - blocking (`send`, `receive` in synchronous code), for a thread that owns its sockets — they
///   honour ``SocketOption/sendTimeout`` and ``SocketOption/receiveTimeout``;
/// - non-blocking (`trySend`, `tryReceive`), for an event loop driven by a ``Poller``;
/// - `async` (`send`, `receive` from async code), which suspend the task, not the thread, until the
///   socket is ready, using `ZMQ_FD` the way libzmq means it to be used.
///
/// The socket closes itself when released; ``close()`` closes it earlier.
public final class Socket {
    /// The context this socket belongs to (kept alive by the socket).
    public let context: Context
    /// The socket's type.
    public let type: SocketType

    private var handle: UnsafeMutableRawPointer?
    /// Reused for every receive into a closure, so that those allocate nothing.
    private let scratch: UnsafeMutablePointer<zmq_msg_t>
    /// The readiness watcher's registration of this socket's ZMQ_FD, made on first async wait.
    var readinessID: UInt64?
    /// Whether a monitor is attached (it must be detached before the socket closes).
    var isMonitored = false
    /// How many of the owner's tasks are suspended in ``waitUntilReady(for:timeout:)`` right now.
    var suspendedWaits = 0
    /// How many receives that do not wait found no message ready, and readings of ``pendingEvents()``
    /// or ``Poller/poll(timeout:)`` that found the socket not readable: each a moment at which the owner
    /// had read every whole message libzmq held for it, so that what a connection had handed
    /// libzmq before then and not delivered is part of a message not finished (the bound on such
    /// messages judges a connection only after one, not while the owner is behind).
    public internal(set) var emptyReceives: UInt64 = 0
    /// Whether a send reads `ZMQ_EVENTS` for the owner's other waiters at most once per interval
    /// (10 ms), asking the readiness watcher to resume them when the interval is up instead of
    /// reading after every message (``wakeOtherWaiters(afterSending:flags:)``). For a socket whose
    /// other waiter can take that delay now and then and whose sends are many: a publisher's task
    /// reading subscriptions. Off, every send reads as before.
    public var coalescesReadingsAfterSends = false
    /// When a send last read `ZMQ_EVENTS` for the owner's other waiters, and when the recheck it
    /// asked for instead is due; monotonic nanoseconds.
    var lastSendReading: UInt64 = 0
    var recheckDue: UInt64 = 0

    init(context: Context, type: SocketType) throws(ZMQError) {
        guard let handle = zmq_socket(context.handle, type.rawValue) else {
            throw ZMQError.last("zmq_socket(\(type))")
        }
        self.context = context
        self.type = type
        self.handle = handle
        scratch = .allocate(capacity: 1)
        zmq_msg_init(scratch)
    }

    deinit {
        close()
        zmq_msg_close(scratch)
        scratch.deallocate()
    }

    /// Whether ``close()`` has run.
    public var isClosed: Bool { handle == nil }

    /// Closes the socket: detaches its monitor, wakes its pending `async` calls (they throw
    /// ``ZMQError/Code/notASocket``), and frees it. Calling it twice does nothing.
    public func close() {
        guard let handle else { return }
        if isMonitored {
            zmq_socket_monitor(handle, nil, 0)
            isMonitored = false
        }
        if let readinessID {
            ReadinessWatcher.shared.unregister(readinessID)
            self.readinessID = nil
        }
        zmq_close(handle)
        self.handle = nil
    }

    /// The open handle, or the error every call on a closed socket gets.
    @inline(__always)
    func open(_ operation: @autoclosure () -> String) throws(ZMQError) -> UnsafeMutableRawPointer {
        guard let handle else { throw ZMQError(.notASocket, operation: operation()) }
        return handle
    }

    // MARK: Endpoints

    /// Listens on an endpoint: `tcp://127.0.0.1:5555`, `tcp://*:*` (any free port; see
    /// ``lastEndpoint``), `ipc:///run/handoff.sock`, `inproc://name`.
    ///
    /// - Throws: ``ZMQError`` — `invalidArgument` for a malformed endpoint, `protocolNotSupported`
    ///   for an unknown transport, `addressInUse`, `addressNotAvailable`.
    public func bind(_ endpoint: String) throws(ZMQError) {
        let handle = try open("zmq_bind(\"\(endpoint)\")")
        try zmqCall("zmq_bind(\"\(endpoint)\")") { zmq_bind(handle, endpoint) }
    }

    /// Connects to an endpoint. The connection is made (and remade) in the background; messages
    /// queue until it is up.
    public func connect(_ endpoint: String) throws(ZMQError) {
        let handle = try open("zmq_connect(\"\(endpoint)\")")
        try zmqCall("zmq_connect(\"\(endpoint)\")") { zmq_connect(handle, endpoint) }
    }

    /// Stops listening on an endpoint passed to ``bind(_:)`` (with the port resolved, as ``lastEndpoint`` gives it).
    public func unbind(_ endpoint: String) throws(ZMQError) {
        let handle = try open("zmq_unbind(\"\(endpoint)\")")
        try zmqCall("zmq_unbind(\"\(endpoint)\")") { zmq_unbind(handle, endpoint) }
    }

    /// Drops a connection made by ``connect(_:)``.
    public func disconnect(_ endpoint: String) throws(ZMQError) {
        let handle = try open("zmq_disconnect(\"\(endpoint)\")")
        try zmqCall("zmq_disconnect(\"\(endpoint)\")") { zmq_disconnect(handle, endpoint) }
    }

    /// The endpoint last bound, with a wildcard port resolved (e.g. `tcp://127.0.0.1:41234`).
    public var lastEndpoint: String {
        get throws(ZMQError) { try get(.lastEndpoint) }
    }

    // MARK: Options

    /// Sets a socket option.
    ///
    /// - Throws: ``ZMQError`` — `invalidArgument` when libzmq rejects the value for this socket type.
    public func set<Value>(_ option: SocketOption<Value>, _ value: Value) throws(ZMQError) {
        let handle = try open("zmq_setsockopt(\(option.name))")
        _ = try value.withOptionBytes { (bytes) throws(ZMQError) in
            try zmqCall("zmq_setsockopt(\(option.name))") {
                zmq_setsockopt(handle, option.rawValue, bytes.baseAddress, bytes.count)
            }
        }
    }

    /// Reads a socket option.
    public func get<Value>(_ option: SocketOption<Value>) throws(ZMQError) -> Value {
        let handle = try open("zmq_getsockopt(\(option.name))")
        return try Value.read(capacity: option.readCapacity ?? Value.optionCapacity) { (buffer, size) throws(ZMQError) in
            try zmqCall("zmq_getsockopt(\(option.name))") {
                zmq_getsockopt(handle, option.rawValue, buffer, &size)
            }
        }
    }

    /// Subscribes a SUB socket to every message whose first frame starts with `prefix`.
    public func subscribe(_ prefix: String = "") throws(ZMQError) {
        try set(.subscribe, Array(prefix.utf8))
    }

    /// Removes a subscription made by ``subscribe(_:)``.
    public func unsubscribe(_ prefix: String) throws(ZMQError) {
        try set(.unsubscribe, Array(prefix.utf8))
    }

    /// What the socket is ready for right now. Reading it also processes libzmq's pending commands
    /// (and so wakes any of the owner's tasks suspended on a wait this now satisfies).
    public func pendingEvents() throws(ZMQError) -> PollEvents {
        let events = PollEvents(rawValue: Int16(truncatingIfNeeded: try get(.events)))
        if !events.contains(.readable) { emptyReceives &+= 1 }
        if suspendedWaits > 0, let readinessID, !events.isEmpty {
            ReadinessWatcher.shared.wake(readinessID, satisfying: events.rawValue)
        }
        return events
    }

    // MARK: Sending

    /// Sends one frame, blocking until libzmq queues it (or ``SocketOption/sendTimeout`` passes).
    ///
    /// - Parameters:
    ///   - bytes: The frame's contents, copied into libzmq.
    ///   - more: Whether further frames of the same message follow.
    /// - Throws: ``ZMQError`` — `wouldBlock` when the send timeout expired; `invalidState` for a
    ///   REQ/REP out of turn; `hostUnreachable` for a mandatory ROUTER's unknown peer.
    public func send(_ bytes: some ContiguousBytes, more: Bool = false) throws(ZMQError) {
        _ = try rawSend(bytes, flags: more ? ZMQ_SNDMORE : 0)
    }

    /// Sends one frame if libzmq can queue it now.
    ///
    /// - Returns: `false` when the socket cannot take it without blocking (high-water mark, no peer).
    public func trySend(_ bytes: some ContiguousBytes, more: Bool = false) throws(ZMQError) -> Bool {
        try rawSend(bytes, flags: ZMQ_DONTWAIT | (more ? ZMQ_SNDMORE : 0))
    }

    /// Sends a frame without copying its contents (large frames are shared by reference).
    public func send(_ message: Frame, more: Bool = false) throws(ZMQError) {
        _ = try rawSend(message, flags: more ? ZMQ_SNDMORE : 0)
    }

    /// Sends a frame if libzmq can queue it now; `false` otherwise.
    public func trySend(_ message: Frame, more: Bool = false) throws(ZMQError) -> Bool {
        try rawSend(message, flags: ZMQ_DONTWAIT | (more ? ZMQ_SNDMORE : 0))
    }

    /// Sends every frame of a multipart message, blocking as needed.
    public func send(multipart frames: [any ContiguousBytes]) throws(ZMQError) {
        for (index, frame) in frames.enumerated() {
            try send(frame, more: index < frames.count - 1)
        }
    }

    /// Sends every frame of a multipart message, blocking as needed.
    public func send(multipart frames: [Frame]) throws(ZMQError) {
        for (index, frame) in frames.enumerated() {
            try send(frame, more: index < frames.count - 1)
        }
    }

    private func rawSend(_ bytes: some ContiguousBytes, flags: Int32) throws(ZMQError) -> Bool {
        let handle = try open("zmq_send(\(type))")
        var sent = false
        defer { wakeOtherWaiters(afterSending: sent, flags: flags) }
        let result: Result<Bool, ZMQError> = bytes.withUnsafeBytes { buffer in
            while true {
                if zmq_send(handle, buffer.baseAddress, buffer.count, flags) >= 0 { return .success(true) }
                let error = zmq_errno()
                if error == EINTR { continue }
                if error == EAGAIN && flags & ZMQ_DONTWAIT != 0 { return .success(false) }
                return .failure(ZMQError(.init(rawValue: error), operation: "zmq_send(\(type), \(buffer.count) bytes)"))
            }
        }
        sent = try result.get()
        return sent
    }

    private func rawSend(_ message: Frame, flags: Int32) throws(ZMQError) -> Bool {
        try sendSharing(message.storage, flags: flags)
    }

    /// Sends a reference-counted copy of `message` (a ``Frame``'s, or one a ``ReceivedMessage``
    /// keeps), which stays as it is: libzmq shares the bytes. False when it would block.
    func sendSharing(_ message: UnsafeMutablePointer<zmq_msg_t>, flags: Int32) throws(ZMQError) -> Bool {
        var outgoing = zmq_msg_t()
        zmq_msg_init(&outgoing)
        // zmq_msg_copy fails only for an uninitialized message, which neither ever is.
        zmq_msg_copy(&outgoing, message)
        defer { zmq_msg_close(&outgoing) }
        return try sendHandingOver(&outgoing, flags: flags)
    }

    /// Sends `message` itself: on success libzmq owns what it held and leaves it empty (as
    /// `zmq_msg_send` does); false, and `message` as it was, when it would block.
    func sendHandingOver(_ message: UnsafeMutablePointer<zmq_msg_t>, flags: Int32) throws(ZMQError) -> Bool {
        let handle = try open("zmq_msg_send(\(type))")
        var sent = false
        defer { wakeOtherWaiters(afterSending: sent, flags: flags) }
        while true {
            if zmq_msg_send(message, handle, flags) >= 0 {
                sent = true
                return true
            }
            let error = zmq_errno()
            if error == EINTR { continue }
            if error == EAGAIN && flags & ZMQ_DONTWAIT != 0 { return false }
            throw ZMQError(.init(rawValue: error), operation: "zmq_msg_send(\(type), \(zmq_msg_size(message)) bytes)")
        }
    }

    // MARK: Receiving

    /// Receives one frame, blocking until one arrives (or ``SocketOption/receiveTimeout`` passes).
    ///
    /// - Throws: ``ZMQError`` — `wouldBlock` when the receive timeout expired;
    ///   `contextTerminated` after ``Context/shutdown()``.
    public func receive() throws(ZMQError) -> Frame {
        try rawReceive(flags: 0)!
    }

    /// Receives one frame if one is waiting; `nil` otherwise.
    public func tryReceive() throws(ZMQError) -> Frame? {
        try rawReceive(flags: ZMQ_DONTWAIT)
    }

    /// Receives every frame of the next multipart message, blocking as needed.
    public func receiveMultipart() throws(ZMQError) -> [Frame] {
        var frames = [try receive()]
        while frames.last!.hasMore { frames.append(try receive()) }
        return frames
    }

    /// Receives one frame into a buffer the socket reuses and passes it to `body` in place: no
    /// copy, no allocation. The bytes are valid only inside `body`.
    ///
    /// - Parameter body: Called with the frame's bytes and whether more frames follow.
    /// - Returns: What `body` returns, or `nil` when `wait` is false and no frame is waiting.
    public func receive<R>(
        wait: Bool = true,
        _ body: (UnsafeRawBufferPointer, _ more: Bool) throws -> R
    ) throws -> R? {
        let handle = try open("zmq_msg_recv(\(type))")
        var more = false
        defer { if !more { wakeOtherWaiters() } }
        let flags = wait ? 0 : ZMQ_DONTWAIT
        while true {
            if zmq_msg_recv(scratch, handle, flags) >= 0 {
                more = zmq_msg_more(scratch) == 1
                break
            }
            let error = zmq_errno()
            if error == EINTR { continue }
            if error == EAGAIN && !wait {
                emptyReceives &+= 1
                return nil
            }
            throw ZMQError(.init(rawValue: error), operation: "zmq_msg_recv(\(type))")
        }
        let bytes = UnsafeRawBufferPointer(start: zmq_msg_data(scratch), count: zmq_msg_size(scratch))
        return try body(bytes, more)
    }

    private func rawReceive(flags: Int32) throws(ZMQError) -> Frame? {
        let handle = try open("zmq_msg_recv(\(type))")
        var more = false
        defer { if !more { wakeOtherWaiters() } }
        while true {
            if zmq_msg_recv(scratch, handle, flags) >= 0 {
                more = zmq_msg_more(scratch) == 1
                return Frame(moving: scratch)
            }
            let error = zmq_errno()
            if error == EINTR { continue }
            if error == EAGAIN && flags & ZMQ_DONTWAIT != 0 {
                emptyReceives &+= 1
                return nil
            }
            throw ZMQError(.init(rawValue: error), operation: "zmq_msg_recv(\(type))")
        }
    }

    /// Waits (blocking the thread) until the socket is ready for one of `events`, or `timeout` passes.
    ///
    /// - Returns: The events the socket is ready for; empty when the timeout passed first.
    public func poll(_ events: PollEvents, timeout: Duration? = nil) throws(ZMQError) -> PollEvents {
        var poller = Poller()
        poller.add(self, events)
        return try poller.poll(timeout: timeout)[0]
    }
}
