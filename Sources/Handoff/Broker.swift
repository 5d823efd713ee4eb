import Dispatch
import Foundation
import HandoffWire
import Logging
import ServiceLifecycle
import SwiftProtobuf
import Synchronization
import ZeroMQ

/// The bus broker of a multi-process deployment: an XSUB ⇄ XPUB proxy with a last-value cache.
///
/// Nodes publish to the broker's frontend and subscribe at its backend. Every bus message has two
/// frames: a topic (`"A:" + activityType` for advertisements and withdrawals, `"P:" + nodeID` for
/// node presence) and a serialized ``HandoffWire/WireEnvelope``. The broker forwards every message
/// from the frontend to the backend and every subscription from the backend to the frontend, frames
/// as they are, without copying them.
///
/// With the last-value cache on, the broker also remembers the newest advertisement of every live
/// activity, and when a subscriber subscribes to a prefix it sends that subscriber every cached
/// advertisement whose topic starts with the prefix, right away: a node that joins late sees every
/// current activity at once instead of waiting for the next re-advertisement. Other subscribers of
/// the same prefix get those advertisements again; nodes ignore an advertisement whose version they
/// already have. To cache what publishers send before anyone subscribes, the broker then subscribes
/// its frontend to everything, so all bus traffic reaches it.
///
/// The broker runs on a thread of its own, which owns all of its sockets; ``stop()`` ends it.
/// ``Broker`` is also a swift-service-lifecycle `Service` for a `ServiceGroup`.
///
/// ```swift
/// let broker = try Broker.start(.init(frontend: "tcp://*:5555", backend: "tcp://*:5556"), context: context)
/// defer { broker.stop() }
/// print(broker.counters.messagesIn)
/// ```
public final class Broker: Sendable {
    /// Where the broker listens and how it caches.
    ///
    /// High-water marks: the broker is a fan-in/fan-out point, so its queues are much deeper than
    /// libzmq's default of 1,000 — deep enough to replay a full cache to a late joiner at once. At a
    /// subscriber's high-water mark the backend drops messages for that subscriber alone (XPUB
    /// semantics): one slow node never stalls the bus. Linger is 0 on every socket: a stopped
    /// broker does not hold on to undelivered messages; publishers re-advertise periodically anyway.
    public struct Configuration: Sendable, Hashable {
        /// Where publishers connect (the broker binds an XSUB socket there).
        public var frontend: String
        /// Where subscribers connect (the broker binds an XPUB socket there, verbose: every
        /// subscription reaches the broker, duplicates included).
        public var backend: String
        /// Where to publish a copy of every forwarded message, both directions, or `nil` for none.
        public var capture: String?
        /// Every endpoint the broker binds.
        public var endpoints: [String] { [frontend, backend] + (capture.map { [$0] } ?? []) }
        /// Whether to cache advertisements and replay them to new subscriptions.
        public var lastValueCache: Bool
        /// The most activities the cache holds; when it is full, the entry that would expire
        /// soonest makes room. Keep it at most ``highWaterMark`` so a full replay fits a
        /// subscriber's queue.
        public var cacheCapacity: Int
        /// How long to cache an advertisement whose `leaseMs` is 0 (unset).
        public var defaultLease: Duration
        /// Send and receive high-water mark of every broker socket, in messages per peer.
        public var highWaterMark: Int32
        /// The broker's key pair and the account: with it, the frontend, backend and capture run
        /// CURVE and let in only the account's nodes (``Security/authorizedKeys``). `nil` runs
        /// without encryption or authentication, which is allowed only on loopback unless
        /// ``allowInsecure`` is set.
        public var security: Security?
        /// Whether to listen beyond loopback without ``security`` (local development only).
        public var allowInsecure: Bool

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - frontend: Endpoint to bind for publishers; `tcp://127.0.0.1:*` picks a free port.
        ///   - backend: Endpoint to bind for subscribers.
        ///   - capture: Endpoint to bind for the capture copy, or `nil`.
        ///   - lastValueCache: Whether to cache and replay advertisements.
        ///   - cacheCapacity: The most activities cached (at least 1).
        ///   - defaultLease: Cache lifetime of an advertisement without a lease (more than zero).
        ///   - highWaterMark: Queue depth per peer, in messages; 0 means unlimited.
        public init(
            frontend: String = "tcp://127.0.0.1:5555",
            backend: String = "tcp://127.0.0.1:5556",
            capture: String? = nil,
            lastValueCache: Bool = true,
            cacheCapacity: Int = 100_000,
            defaultLease: Duration = .seconds(30),
            highWaterMark: Int32 = 100_000
        ) {
            self.frontend = frontend
            self.backend = backend
            self.capture = capture
            self.lastValueCache = lastValueCache
            self.cacheCapacity = cacheCapacity
            self.defaultLease = defaultLease
            self.highWaterMark = highWaterMark
            security = nil
            allowInsecure = false
        }
    }

    /// What the broker has done since it started, as of the moment it was read.
    ///
    /// A message is counted before it is passed on, so once a subscriber has received a message,
    /// the counters include it and everything forwarded before it.
    public struct Counters: Sendable, Hashable {
        /// Messages received from publishers.
        public var messagesIn = 0
        /// Bytes received from publishers (all frames).
        public var bytesIn = 0
        /// Messages handed to the backend for subscribers: forwarded ones plus cache replays. A
        /// message counts once, however many subscribers it reaches.
        public var messagesOut = 0
        /// Bytes handed to the backend (all frames), forwarded and replayed.
        public var bytesOut = 0
        /// Subscription messages seen at the backend (verbose: duplicates included).
        public var subscriptions = 0
        /// Unsubscription messages seen at the backend (libzmq reports one when the last
        /// subscriber of a prefix goes away).
        public var unsubscriptions = 0
        /// Activities in the cache now (expired ones are removed when their lease ends).
        public var cachedActivities = 0
        /// Snapshot requests answered (wire.proto, "Snapshots").
        public var snapshots = 0
        /// Cached advertisements sent in snapshots, each to one subscriber.
        public var snapshotAdvertisements = 0
        /// Messages from publishers that are not a topic frame plus a ``HandoffWire/WireEnvelope``
        /// this build can decode. They are forwarded all the same, but never cached.
        public var malformed = 0
        /// CURVE handshakes let in (secure brokers only).
        public var allowedHandshakes = 0
        /// CURVE handshakes refused: keys not in the account, or peers without CURVE. Each is
        /// also logged.
        public var refusedHandshakes = 0

        /// Creates zeroed counters.
        public init() {}
    }

    /// The configuration the broker was started with.
    public let configuration: Configuration
    /// The frontend endpoint as bound, with a wildcard port resolved (e.g. `tcp://127.0.0.1:41234`).
    public let frontendEndpoint: String
    /// The backend endpoint as bound, with a wildcard port resolved.
    public let backendEndpoint: String
    /// The capture endpoint as bound, or `nil` without capture.
    public let captureEndpoint: String?

    private let context: Context
    private let controlEndpoint: String
    private let shared: SharedState
    /// The context's ZAP handler, when secure.
    private let zap: ZAPHandler?
    /// The ZAP domain of the broker's sockets.
    static let zapDomain = "handoff.broker"

    private init(
        configuration: Configuration, endpoints: BoundEndpoints, context: Context,
        controlEndpoint: String, shared: SharedState, zap: ZAPHandler?
    ) {
        self.zap = zap
        self.configuration = configuration
        frontendEndpoint = endpoints.frontend
        backendEndpoint = endpoints.backend
        captureEndpoint = endpoints.capture
        self.context = context
        self.controlEndpoint = controlEndpoint
        self.shared = shared
    }

    deinit {
        stop()
    }

    /// Binds the broker's sockets and starts forwarding on a new thread.
    ///
    /// Every socket is bound before this returns, so a taken port or a bad endpoint fails here.
    ///
    /// - Parameters:
    ///   - configuration: Endpoints and cache settings.
    ///   - context: The context to make the sockets in.
    /// - Returns: The running broker.
    /// - Throws: ``ZeroMQ/ZMQError`` — `addressInUse`, `invalidArgument` (a malformed endpoint, or
    ///   a configuration value out of range), `protocolNotSupported`, `addressNotAvailable`,
    ///   `contextTerminated`. When it throws, the broker's thread has already ended.
    public static func start(_ configuration: Configuration = Configuration(), context: Context) throws(ZMQError) -> Broker {
        try start(configuration, context: context, onLoopExit: nil)
    }

    /// ``start(_:context:)`` with a hook the loop thread calls last, after closing its sockets (for tests).
    static func start(
        _ configuration: Configuration, context: Context, onLoopExit: (@Sendable () -> Void)?
    ) throws(ZMQError) -> Broker {
        guard configuration.cacheCapacity >= 1 else {
            throw ZMQError(.invalidArgument, operation: "Broker.start (cacheCapacity \(configuration.cacheCapacity), must be at least 1)")
        }
        guard configuration.defaultLease > .zero else {
            throw ZMQError(.invalidArgument, operation: "Broker.start (defaultLease \(configuration.defaultLease), must be more than zero)")
        }
        guard configuration.highWaterMark >= 0 else {
            throw ZMQError(.invalidArgument, operation: "Broker.start (highWaterMark \(configuration.highWaterMark), must not be negative)")
        }
        do throws(HandoffError) {
            try Security.requireSecurity(
                for: configuration.endpoints, security: configuration.security,
                allowInsecure: configuration.allowInsecure, what: "the broker")
        } catch {
            throw ZMQError(.invalidArgument, operation: error.message)
        }
        var zap: ZAPHandler?
        if let security = configuration.security {
            var logger = Logger(label: "handoff.broker")
            logger[metadataKey: "broker"] = "\(configuration.frontend)"
            zap = try ZAPHandler.shared(for: context)
            zap!.setPolicy(forDomain: Self.zapDomain, security.zapPolicy(logger: logger, what: "the broker"))
        }
        let controlEndpoint = "inproc://handoff-broker-control-\(UUID().uuidString)"
        let shared = SharedState()
        let ready = DispatchSemaphore(value: 0)
        shared.exited.enter()
        let thread = Thread {
            var loop: BrokerLoop?
            do throws(ZMQError) {
                loop = try BrokerLoop(configuration, context: context, control: controlEndpoint, shared: shared)
                shared.startup.withLock { $0 = .success(loop!.endpoints) }
            } catch {
                shared.startup.withLock { $0 = .failure(error) }
            }
            ready.signal()
            if let running = loop {
                do throws(ZMQError) {
                    try running.run()
                } catch {
                    shared.failure.withLock { $0 = error }
                }
                running.close()
            }
            loop = nil
            onLoopExit?()
            shared.exited.leave()
        }
        thread.name = "handoff-broker"
        thread.start()
        ready.wait()
        switch shared.startup.withLock({ $0 })! {
        case .failure(let error):
            shared.exited.wait()
            throw error
        case .success(let endpoints):
            return Broker(
                configuration: configuration, endpoints: endpoints, context: context,
                controlEndpoint: controlEndpoint, shared: shared, zap: zap)
        }
    }

    /// A snapshot of the broker's counters.
    public var counters: Counters {
        var counters = shared.counters.withLock { $0 }
        if let zap {
            let handshakes = zap.counters(forDomain: Self.zapDomain)
            counters.allowedHandshakes = handshakes.allowed
            counters.refusedHandshakes = handshakes.refused
        }
        return counters
    }

    /// Replaces the account — the public keys allowed in — without a restart: handshakes from now
    /// on are checked against `authorizedKeys` (the broker's own key is always allowed). Connections
    /// already made stay; a node refused before gets in at its next retry.
    ///
    /// - Throws: ``HandoffError`` (``HandoffError/Code-swift.struct/invalidConfiguration``) when the
    ///   broker runs without CURVE and so has no account.
    public func updateAccount(_ authorizedKeys: Set<CurveKey>) throws(HandoffError) {
        guard let zap, var security = configuration.security else {
            throw HandoffError(.invalidConfiguration, "the broker runs without CURVE: it has no account to update")
        }
        security.authorizedKeys = authorizedKeys
        var logger = Logger(label: "handoff.broker")
        logger[metadataKey: "broker"] = "\(configuration.frontend)"
        zap.setPolicy(forDomain: Self.zapDomain, security.zapPolicy(logger: logger, what: "the broker"))
    }

    /// Whether the broker's thread is still forwarding (false after ``stop()``, or after the
    /// context was shut down).
    public var isRunning: Bool {
        shared.exited.wait(timeout: .now()) == .timedOut
    }

    /// Stops the broker: tells its thread to finish, and waits until it has closed every socket.
    ///
    /// Safe to call more than once, from any thread; later calls just wait for the first to finish.
    public func stop() {
        requestStop()
        shared.exited.wait()
    }

    /// Tells the loop thread to finish, without waiting. Only the first call sends anything.
    ///
    /// The message goes over a PAIR socket made, used and closed right here, so no socket is ever
    /// used by two threads.
    private func requestStop() {
        let first = shared.stopRequested.withLock { requested in
            defer { requested = true }
            return !requested
        }
        guard first, isRunning else { return }
        do {
            let control = try context.socket(.pair)
            // Non-zero linger: the command must reach the loop even though we close at once.
            try control.set(.linger, 1_000)
            try control.connect(controlEndpoint)
            // The loop's end is bound, so inproc attaches the pipe during connect and this queues
            // at once; it fails only when the loop has already closed its sockets.
            _ = try control.trySend(Array(BrokerLoop.terminate.utf8))
            control.close()
        } catch {
            // Only a shut-down context gets here, and then the loop ends by itself.
        }
    }

    /// Suspends until the loop thread has ended, without blocking a thread.
    private func loopExited() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            shared.exited.notify(queue: .global()) { continuation.resume() }
        }
    }
}

// MARK: - Service

extension Broker: Service {
    /// Keeps the broker running until graceful shutdown or task cancellation, then stops it.
    ///
    /// The broker is already forwarding when ``start(_:context:)`` returns; `run()` only ties its
    /// lifetime to a `ServiceGroup` or a task.
    ///
    /// - Throws: The ``ZeroMQ/ZMQError`` that ended the broker's thread early (for instance
    ///   `contextTerminated` when the context was shut down under it).
    public func run() async throws {
        await withTaskCancellationOrGracefulShutdownHandler {
            await self.loopExited()
        } onCancelOrGracefulShutdown: {
            self.requestStop()
        }
        stop()
        if let failure = shared.failure.withLock({ $0 }) {
            throw failure
        }
    }
}

// MARK: - Shared between the caller and the loop thread

/// The resolved endpoints the loop thread reports once it has bound its sockets.
private struct BoundEndpoints: Sendable {
    var frontend: String
    var backend: String
    var capture: String?
}

/// What the loop thread and the ``Broker`` handle share: only values under locks, and a group.
private final class SharedState: Sendable {
    /// The loop publishes its counters here before passing each message on.
    let counters = Mutex(Broker.Counters())
    /// Set once by the loop thread when it has bound (or failed to bind) its sockets.
    let startup = Mutex<Result<BoundEndpoints, ZMQError>?>(nil)
    /// The error that ended the loop early, if any.
    let failure = Mutex<ZMQError?>(nil)
    /// Whether a stop was requested (the control message is sent once).
    let stopRequested = Mutex(false)
    /// Entered before the thread starts, left as the thread's very last action.
    let exited = DispatchGroup()
}

// MARK: - The loop thread

/// The broker's event loop and everything it owns. Made, used and dropped on the loop thread only.
private final class BrokerLoop {
    /// The command that ends the loop.
    static let terminate = "TERMINATE"
    /// Messages handled per socket per wake-up, so neither direction starves the other.
    private static let batch = 1_024

    let endpoints: BoundEndpoints
    private let frontend: Socket
    private let backend: Socket
    private let capture: Socket?
    private let control: Socket
    private let shared: SharedState
    private let cacheEnabled: Bool
    private var cache: LastValueCache
    private var counters = Broker.Counters()
    /// Who signs the broker's own envelopes (snapshot replies): `broker@host`, with its key.
    private let identity: WireNodeRef
    private var sequence = UInt64(Date().timeIntervalSince1970 * 1_000_000)

    init(_ configuration: Broker.Configuration, context: Context, control endpoint: String, shared: SharedState) throws(ZMQError) {
        var opened: [Socket] = []
        func open(_ type: SocketType) throws(ZMQError) -> Socket {
            let socket = try context.socket(type)
            opened.append(socket)
            try socket.set(.linger, 0)
            return socket
        }
        do {
            let hwm = configuration.highWaterMark
            let security = configuration.security
            func secure(_ socket: Socket) throws(ZMQError) {
                try security?.secureServer(socket, domain: Broker.zapDomain)
            }
            frontend = try open(.xsub)
            try secure(frontend)
            try frontend.set(.receiveHighWaterMark, hwm)
            try frontend.set(.sendHighWaterMark, hwm)
            // The contract's frame limit: a larger frame (or handshake command) disconnects its sender.
            try frontend.set(.maxMessageSize, Int64(WireLimits.maxBusFrame))
            try frontend.bind(configuration.frontend)
            backend = try open(.xpub)
            try secure(backend)
            try backend.set(.sendHighWaterMark, hwm)
            try backend.set(.receiveHighWaterMark, hwm)
            try backend.set(.xpubVerbose, true)
            try backend.set(.maxMessageSize, Int64(WireLimits.maxBusFrame))
            try backend.bind(configuration.backend)
            if let captureAddress = configuration.capture {
                let socket = try open(.pub)
                try secure(socket)
                try socket.set(.sendHighWaterMark, hwm)
                try socket.set(.maxMessageSize, Int64(WireLimits.maxBusFrame))
                try socket.bind(captureAddress)
                capture = socket
            } else {
                capture = nil
            }
            control = try open(.pair)
            try control.bind(endpoint)
            endpoints = BoundEndpoints(
                frontend: try frontend.lastEndpoint,
                backend: try backend.lastEndpoint,
                capture: try capture?.lastEndpoint)
            if configuration.lastValueCache {
                // Publishers (PUB) drop what nobody subscribed to. The cache must see every
                // advertisement, also those sent before the first subscriber came.
                _ = try frontend.trySend([UInt8(1)])
            }
        } catch {
            for socket in opened { socket.close() }
            throw error
        }
        self.shared = shared
        let host = ProcessInfo.processInfo.hostName
        identity = NodeInfo(id: "broker@\(host)", name: "broker", host: host,
                            publicKey: configuration.security?.keyPair.publicKey).wire
        cacheEnabled = configuration.lastValueCache
        cache = LastValueCache(capacity: configuration.cacheCapacity, defaultLease: configuration.defaultLease)
    }

    /// Closes every socket.
    func close() {
        frontend.close()
        backend.close()
        capture?.close()
        control.close()
    }

    /// Forwards until ``terminate`` arrives on the control socket.
    func run() throws(ZMQError) {
        var poller = Poller()
        let frontendIndex = poller.add(frontend, .readable)
        let backendIndex = poller.add(backend, .readable)
        let controlIndex = poller.add(control, .readable)
        while true {
            // Wake up for the next expiry, so the cache (and its counter) drops it on time.
            let timeout = cache.nextExpiry.map { max(.zero, ContinuousClock.now.duration(to: $0)) }
            let ready = try poller.poll(timeout: timeout)
            if ready[controlIndex].contains(.readable), try handleControl() { return }
            if ready[frontendIndex].contains(.readable) {
                var handled = 0
                while handled < Self.batch, try forwardDownstream() { handled += 1 }
            }
            if ready[backendIndex].contains(.readable) {
                var handled = 0
                while handled < Self.batch, try forwardUpstream() { handled += 1 }
            }
            if cache.removeExpired(now: .now) { publishCounters() }
        }
    }

    private func publishCounters() {
        counters.cachedActivities = cache.count
        let snapshot = counters
        shared.counters.withLock { $0 = snapshot }
    }

    /// Reads a control command; true to end the loop.
    private func handleControl() throws(ZMQError) -> Bool {
        guard let command = try control.tryReceive() else { return false }
        var frames = [command]
        while frames.last!.hasMore { frames.append(try control.receive()) }
        return command.string == Self.terminate
    }

    /// Receives the rest of a multipart message (its frames arrive together, so this never waits).
    private func receiveRest(of first: Frame, from socket: Socket) throws(ZMQError) -> [Frame] {
        var frames = [first]
        while frames.last!.hasMore { frames.append(try socket.receive()) }
        return frames
    }

    /// Sends frames as they are (libzmq shares their bytes); false when the socket refused them.
    @discardableResult
    private func send(_ frames: [Frame], to socket: Socket) throws(ZMQError) -> Bool {
        for (index, frame) in frames.enumerated() {
            guard try socket.trySend(frame, more: index < frames.count - 1) else { return false }
        }
        return true
    }

    /// Publisher → subscribers: one message. False when none was waiting.
    private func forwardDownstream() throws(ZMQError) -> Bool {
        guard let first = try frontend.tryReceive() else { return false }
        let frames = try receiveRest(of: first, from: frontend)
        let size = frames.reduce(0) { $0 + $1.count }
        let content = Self.decodeBusMessage(frames)
        counters.messagesIn += 1
        counters.bytesIn += size
        if cacheEnabled {
            switch content {
            case .advertisement(let advertisement):
                cache.store(advertisement, frames: frames, now: .now)
            case .withdrawal(let activityID):
                cache.remove(activityID)
            case .other, .malformed:
                break
            }
        }
        if case .malformed = content { counters.malformed += 1 }
        counters.messagesOut += 1
        counters.bytesOut += size
        publishCounters()
        // XPUB never blocks: at a subscriber's high-water mark it drops for that subscriber only.
        try send(frames, to: backend)
        if let capture { try send(frames, to: capture) }
        return true
    }

    /// Subscribers → publishers: one (un)subscription. False when none was waiting.
    ///
    /// A snapshot subscription (wire.proto, "Snapshots") is a request to this broker: answered
    /// here, to that subscriber alone, and not forwarded. Plain subscriptions go to the publishers;
    /// nothing cached is re-sent on them.
    private func forwardUpstream() throws(ZMQError) -> Bool {
        guard let first = try backend.tryReceive() else { return false }
        let frames = try receiveRest(of: first, from: backend)
        var snapshot: (topic: [UInt8], typePrefix: String)?
        var isSnapshotTopic = false
        if frames.count == 1 {
            first.withUnsafeBytes { bytes in
                let topic = bytes.dropFirst()
                isSnapshotTopic = topic.starts(with: Self.snapshotPrefix)
                switch bytes.first {
                case 1:
                    counters.subscriptions += 1
                    if let typePrefix = Topic.snapshotTypePrefix(topic) { snapshot = (Array(topic), typePrefix) }
                case 0:
                    counters.unsubscriptions += 1
                default:
                    break
                }
            }
        }
        publishCounters()
        if let capture { try send(frames, to: capture) }
        if let snapshot {
            try answerSnapshot(topic: snapshot.topic, typePrefix: snapshot.typePrefix)
        } else if !isSnapshotTopic {
            try send(frames, to: frontend)
        }
        return true
    }

    private static let snapshotPrefix = Array(Topic.snapshotPrefix.utf8)

    /// Publishes every live cached advertisement of `typePrefix` under one subscriber's snapshot
    /// topic (each in its origin's own envelope), then the `SnapshotReply` that ends it.
    private func answerSnapshot(topic: [UInt8], typePrefix: String) throws(ZMQError) {
        let matches = cacheEnabled ? cache.live(matching: Array((Topic.activityPrefix + typePrefix).utf8), now: .now) : []
        let topicFrame = Frame(topic)
        var sent = 0
        for frames in matches where frames.count == 2 {
            guard try send([topicFrame, frames[1]], to: backend) else { continue }
            sent += 1
            counters.messagesOut += 1
            counters.bytesOut += topic.count + frames[1].count
        }
        sequence += 1
        let reply: [UInt8] = try! WireEnvelope(
            body: .snapshotReply(WireSnapshotReply(count: sent, typePrefix: typePrefix)),
            sender: identity, sequence: sequence
        ).serializedBytes()
        try send([topicFrame, Frame(reply)], to: backend)
        counters.snapshots += 1
        counters.snapshotAdvertisements += sent
        counters.messagesOut += 1
        counters.bytesOut += topic.count + reply.count
        publishCounters()
    }

    /// What a bus message (topic, envelope) carries, as far as the cache is concerned.
    private enum BusContent {
        case advertisement(CachedAdvertisement)
        case withdrawal(activityID: String)
        case other
        case malformed
    }

    /// Decodes a bus message's envelope in place, without copying the frame.
    private static func decodeBusMessage(_ frames: [Frame]) -> BusContent {
        guard frames.count == 2 else { return .malformed }
        return frames[1].withUnsafeBytes { bytes -> BusContent in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return .malformed }
            // The Data borrows the frame's bytes, so nothing decoded from it may leave this closure
            // (SwiftProtobuf may keep slices of it, e.g. for unknown fields): only copies do.
            let data = Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: base), count: bytes.count, deallocator: .none)
            guard let envelope = try? WireEnvelope.decode(data) else { return .malformed }
            switch envelope.body {
            case .advertisement(let advertisement):
                return .advertisement(CachedAdvertisement(
                    activityID: String(advertisement.activityID), version: advertisement.version,
                    leaseMs: advertisement.leaseMs,
                    expiresAt: advertisement.hasExpiresAt ? advertisement.expiresAt.date : nil))
            case .withdrawal(let withdrawal):
                return .withdrawal(activityID: String(withdrawal.activityID))
            default:
                return .other
            }
        }
    }
}

// MARK: - Last-value cache

/// What the cache needs to know about an advertisement.
struct CachedAdvertisement {
    var activityID: String
    var version: UInt64
    /// The presence lease; 0 when unset.
    var leaseMs: UInt32
    /// The activity's expiration date, if it has one.
    var expiresAt: Date?
}

/// The newest advertisement of each live activity, by activity id, with its frames as received.
///
/// Expiry is tracked with a min-heap of (expiry, id, generation); an entry replaced or removed
/// leaves its heap item behind, recognised as stale by its generation and dropped when it surfaces.
struct LastValueCache {
    struct Entry {
        var frames: [Frame]
        var topic: [UInt8]
        var version: UInt64
        var expiry: ContinuousClock.Instant
        var generation: UInt64
    }

    private struct Deadline: Comparable {
        var expiry: ContinuousClock.Instant
        var id: String
        var generation: UInt64
        static func < (a: Deadline, b: Deadline) -> Bool { a.expiry < b.expiry }
    }

    let capacity: Int
    let defaultLease: Duration
    private(set) var entries: [String: Entry] = [:]
    private var deadlines = MinHeap<Deadline>()
    private var nextGeneration: UInt64 = 0

    init(capacity: Int, defaultLease: Duration) {
        self.capacity = capacity
        self.defaultLease = defaultLease
    }

    /// Activities cached (some may have expired since the last ``removeExpired(now:)``).
    var count: Int { entries.count }

    /// When the earliest entry (or stale heap item) expires; `nil` when there is nothing to expire.
    var nextExpiry: ContinuousClock.Instant? { deadlines.min?.expiry }

    /// Caches an advertisement unless a newer version is cached; an equal version renews it.
    mutating func store(_ advertisement: CachedAdvertisement, frames: [Frame], now: ContinuousClock.Instant) {
        let id = advertisement.activityID
        if let existing = entries[id], existing.expiry > now, existing.version > advertisement.version {
            return
        }
        var lease = advertisement.leaseMs > 0 ? Duration.milliseconds(advertisement.leaseMs) : defaultLease
        if let expiresAt = advertisement.expiresAt {
            lease = min(lease, .seconds(expiresAt.timeIntervalSinceNow))
        }
        guard lease > .zero else {
            // A current advertisement that has already expired: nothing to replay any more.
            remove(id)
            return
        }
        if entries[id] == nil {
            while entries.count >= capacity, evictSoonest() {}
        }
        nextGeneration += 1
        let expiry = now + lease
        entries[id] = Entry(
            frames: frames, topic: frames[0].bytes, version: advertisement.version,
            expiry: expiry, generation: nextGeneration)
        deadlines.insert(Deadline(expiry: expiry, id: id, generation: nextGeneration))
        compactIfNeeded()
    }

    /// Forgets an activity.
    mutating func remove(_ id: String) {
        entries[id] = nil
    }

    /// Drops every entry whose lease has ended; true when anything changed.
    mutating func removeExpired(now: ContinuousClock.Instant) -> Bool {
        var removed = false
        while let first = deadlines.min, first.expiry <= now {
            deadlines.removeMin()
            if entries[first.id]?.generation == first.generation {
                entries[first.id] = nil
                removed = true
            }
        }
        return removed
    }

    /// The frames of every unexpired entry whose topic starts with `prefix`.
    func live(matching prefix: [UInt8], now: ContinuousClock.Instant) -> [[Frame]] {
        entries.values.compactMap { entry in
            entry.expiry > now && entry.topic.starts(with: prefix) ? entry.frames : nil
        }
    }

    /// Removes the entry that expires soonest; false when there is none.
    private mutating func evictSoonest() -> Bool {
        while let first = deadlines.removeMin() {
            if entries[first.id]?.generation == first.generation {
                entries[first.id] = nil
                return true
            }
        }
        return false
    }

    /// Rebuilds the heap when stale items (from renewals and removals) far outnumber live entries.
    private mutating func compactIfNeeded() {
        guard deadlines.count > 4 * entries.count + 1_024 else { return }
        deadlines = MinHeap(entries.map { Deadline(expiry: $0.value.expiry, id: $0.key, generation: $0.value.generation) })
    }
}

/// A binary min-heap.
struct MinHeap<Element: Comparable> {
    private var storage: [Element] = []

    init() {}

    init(_ elements: [Element]) {
        storage = elements
        for index in stride(from: storage.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    var count: Int { storage.count }
    var min: Element? { storage.first }

    mutating func insert(_ element: Element) {
        storage.append(element)
        var child = storage.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard storage[child] < storage[parent] else { break }
            storage.swapAt(child, parent)
            child = parent
        }
    }

    @discardableResult
    mutating func removeMin() -> Element? {
        guard !storage.isEmpty else { return nil }
        storage.swapAt(0, storage.count - 1)
        let first = storage.removeLast()
        siftDown(0)
        return first
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < storage.count, storage[left] < storage[smallest] { smallest = left }
            if right < storage.count, storage[right] < storage[smallest] { smallest = right }
            if smallest == parent { return }
            storage.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
