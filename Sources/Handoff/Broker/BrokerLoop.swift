import Foundation
import HandoffWire
import Logging
import SwiftProtobuf
import Synchronization
import ZeroMQ

/// The broker's event loop and everything it owns: an actor on the process's event loops (as a
/// ``Node`` is), whose tasks — one per socket it receives on, and a timer — own its sockets.
///
/// Sockets are made and bound in the initializer, on the caller's thread, before any task of the
/// actor runs; from then on only the actor uses them. ``run()`` forwards until its task is
/// cancelled (or a socket fails), then closes them.
actor BrokerLoop {
    let endpoints: BoundEndpoints
    private let frontend: Socket
    private let backend: Socket
    private let capture: Socket?
    private let shared: SharedState
    private let cacheEnabled: Bool
    private var cache: LastValueCache
    /// When each origin was last asked to advertise again what the cache lost.
    private var readvertiseRequests = ReadvertiseRequests()
    private var counters = Broker.Counters()
    /// The same counters, reported to swift-metrics.
    private var metrics = BrokerMetrics()
    /// Counts the handshakes ZAP allowed and refused (secure brokers): synchronized into the
    /// counters at most once a second.
    private let zap: ZAPHandler?
    private var nextHandshakeSync = ContinuousClock.now
    /// Whole messages from each side: a bus message is a topic and an envelope, a subscription
    /// one frame; anything much longer is dropped as it is read, and counted as malformed.
    private static let maxFrames = 4
    private let logger: Logger
    /// Origins whose refusal was logged (once each), bounded.
    private var loggedOverQuota: Set<String> = []
    /// Keys whose forgeries were logged (once each), bounded.
    private var loggedForgers: Set<String> = []
    /// Whether the broker runs CURVE, so that every message can be bound to its connection's key.
    private let secure: Bool
    /// Secure: monitors of the frontend, backend and capture for handshakes that fail before ZAP.
    private let handshakeMonitors: [SocketMonitor]
    /// Which refused handshakes are logged (per peer address and reason).
    private var refusalLog = RefusalLog()
    /// Who signs the broker's own envelopes (snapshot replies): `broker@host`, with its key.
    /// The broker's own envelopes (snapshot replies), as a node builds its own.
    private var envelopes: EnvelopeBuilder
    /// The timer that expires cached activities (and, secure, takes ZAP's counts), when one is set.
    private var timer: (task: Task<Void, Never>, deadline: ContinuousClock.Instant, token: UInt64)?
    private var timerTokens: UInt64 = 0

    init(_ configuration: Broker.Configuration, context: Context, shared: SharedState, zap: ZAPHandler?) throws(ZMQError) {
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
            // ZAP counts the keys it refuses; a peer without CURVE, or one that cannot prove the
            // key it claims, fails before ZAP is asked, and only a monitor sees it.
            handshakeMonitors = security == nil ? [] : try ([frontend, backend] + (capture.map { [$0] } ?? [])).map {
                (socket: Socket) throws(ZMQError) -> SocketMonitor in try socket.monitor([.handshakeFailedProtocol, .handshakeFailedNoDetail])
            }
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
        self.zap = zap
        let host = ProcessInfo.processInfo.hostName
        envelopes = EnvelopeBuilder(sender: NodeInfo(id: "broker@\(host)", name: "broker", host: host,
                                                     publicKey: configuration.security?.keyPair.publicKey).wire)
        cacheEnabled = configuration.lastValueCache
        secure = configuration.security != nil
        cache = LastValueCache(
            capacity: configuration.cacheCapacity, perOriginQuota: configuration.maxActivitiesPerOrigin,
            defaultLease: configuration.defaultLease)
        var logger = Logger(label: "handoff.broker")
        logger[metadataKey: "broker"] = "\(configuration.frontend)"
        self.logger = logger
    }

    /// Forwards until the task is cancelled, or a socket fails (the error goes to
    /// ``SharedState/failure``); then closes every socket.
    func run() async {
        scheduleTimer()
        do {
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask { try await self.forwardingDownstream() }
                group.addTask { try await self.forwardingUpstream() }
                for index in self.handshakeMonitors.indices {
                    group.addTask { try await self.watchingHandshakes(index) }
                }
            }
        } catch let error as ZMQError {
            shared.failure.withLock { $0 = error }
        } catch {
            // Cancelled: stopped.
        }
        close()
    }

    /// Stops the timer and closes every socket.
    private func close() {
        timer?.task.cancel()
        timer = nil
        for monitor in handshakeMonitors { monitor.stop() }
        frontend.close()
        backend.close()
        capture?.close()
    }

    /// Publisher → subscribers, message after message. A message dropped as it was read (over
    /// ``maxFrames``) counts as received and malformed.
    private func forwardingDownstream() async throws {
        try await forwarding(from: frontend, dropped: { $0.messagesIn += 1; $0.malformed += 1 }, forwardDownstream)
    }

    /// Subscribers → publishers, message after message. A message dropped as it was read counts as
    /// malformed.
    private func forwardingUpstream() async throws {
        try await forwarding(from: backend, dropped: { $0.malformed += 1 }, forwardUpstream)
    }

    /// Receives whole messages from `socket` and hands each to `forward`, until the task is cancelled
    /// or the socket fails. Yields every ``ReceiveBurst/limit`` messages, so that the other direction
    /// (and the nodes sharing the loop) run under a sustained flow.
    private func forwarding(
        from socket: Socket, dropped: (inout Broker.Counters) -> Void, _ forward: ([Frame]) throws(ZMQError) -> Void
    ) async throws {
        var burst = ReceiveBurst()
        while true {
            await burst.next()
            guard let frames = try await socket.receiveMultipart(maxFrames: Self.maxFrames) else {
                dropped(&counters)
                publishCounters()
                continue
            }
            try forward(frames)
        }
    }

    /// Counts the handshakes one monitor reports failed before ZAP was asked.
    private func watchingHandshakes(_ index: Int) async throws {
        while true {
            guard let event = try await handshakeMonitors[index].next(timeout: .seconds(3_600)) else { continue }
            noteFailedHandshake(event)
        }
    }

    /// Sets the timer for the cache's next expiry (and, secure, the next take of ZAP's counts), unless
    /// one is set that fires no later; it then sets the next when it fires.
    private func scheduleTimer() {
        var deadline = cache.nextExpiry
        if zap != nil { deadline = min(deadline ?? nextHandshakeSync, nextHandshakeSync) }
        guard let deadline else { return }
        if let timer, timer.deadline <= deadline { return }
        timer?.task.cancel()
        timerTokens += 1
        let token = timerTokens
        timer = (Task { [weak self] in
            do { try await Task.sleep(until: deadline, clock: .continuous) } catch { return }
            await self?.timerFired(token)
        }, deadline, token)
    }

    private func timerFired(_ token: UInt64) {
        guard let timer, timer.token == token else { return }
        self.timer = nil
        if cache.removeExpired(now: .now) { publishCounters() }
        syncHandshakes()
        scheduleTimer()
    }

    private func publishCounters() {
        counters.cachedActivities = cache.count
        let snapshot = counters
        shared.counters.withLock { $0 = snapshot }
        metrics.report(snapshot)
    }

    /// Takes ZAP's counts of allowed and refused handshakes into the counters, once a second.
    private func syncHandshakes() {
        guard let zap, ContinuousClock.now >= nextHandshakeSync else { return }
        nextHandshakeSync = .now + .seconds(1)
        let handshakes = zap.counters(forDomain: Broker.zapDomain)
        guard handshakes.allowed != counters.allowedHandshakes
                || handshakes.refused != counters.handshakeRefusals.keyNotInAccount else { return }
        counters.allowedHandshakes = handshakes.allowed
        counters.handshakeRefusals.keyNotInAccount = handshakes.refused
        publishCounters()
    }

    /// Sends frames as they are (libzmq shares their bytes); false when the socket refused them.
    @discardableResult
    private func send(_ frames: [Frame], to socket: Socket) throws(ZMQError) -> Bool {
        for (index, frame) in frames.enumerated() {
            guard try socket.trySend(frame, more: index < frames.count - 1) else { return false }
        }
        return true
    }

    /// Publisher → subscribers: one message.
    private func forwardDownstream(_ frames: [Frame]) throws(ZMQError) {
        let size = frames.reduce(0) { $0 + $1.count }
        let content = BrokerBusContent(frames)
        counters.messagesIn += 1
        counters.bytesIn += size
        // Every message is bound to the key that authenticated its connection (when secure), and
        // only the broker answers on snapshot topics.
        let connectionKey = secure && frames.count == 2 ? frames[1].property("User-Id").flatMap { try? CurveKey(z85: $0).bytes } ?? [] : nil
        let forgery: String? = if frames.first?.bytes.starts(with: Topic.snapshotPrefixBytes) == true {
            "publishes on a snapshot topic, which only the broker answers on"
        } else if let claim = content.claim {
            SenderCheck.forgery(claim, connectionKey: connectionKey, ownerKey: claim.activityID.flatMap(cache.originKey(of:)))
        } else {
            nil
        }
        if let forgery {
            refuseForged(forgery, key: connectionKey)
            return
        }
        if cacheEnabled {
            switch content {
            case .advertisement(let advertisement, _):
                if cache.store(advertisement, frames: frames, now: .now) == .overQuota {
                    refuseOverQuota(advertisement)
                    return
                }
            case .withdrawal(let activityID, _):
                cache.remove(activityID)
            case .presence(let origin, let listed, let partial, let leaseMs, _):
                let lease = leaseMs > 0 ? Duration.milliseconds(leaseMs) : cache.defaultLease
                if cache.renew(origin: origin, listed: listed, partial: partial, lease: lease, now: .now) > 0 {
                    try askToReadvertise(origin)
                }
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
        scheduleTimer()
    }

    /// Counts a handshake that failed before the account was even asked (a peer without CURVE, or
    /// one that could not prove the key it claims) under its reason, and logs it at most once a
    /// minute per peer address and reason.
    private func noteFailedHandshake(_ event: MonitorEvent) {
        guard let reason = HandshakeRefusals.Reason(event) else { return }
        counters.handshakeRefusals[reason] += 1
        publishCounters()
        if let line = refusalLog.line(reason, from: event.peerAddress, at: "the broker's \(event.endpoint)", now: .now) {
            logger.warning("\(line)")
        }
    }

    /// Counts (and logs, once per key) a message dropped because its sender is not who it says, or
    /// it publishes where only the broker may.
    /// Asks an origin whose presence lists activities the cache lacks to advertise them again: a
    /// subscription to "R:" + its node id, sent upstream and withdrawn at once (wire.proto), so
    /// that the next one reaches its publisher too.
    private func askToReadvertise(_ origin: String) throws(ZMQError) {
        guard readvertiseRequests.shouldAsk(origin, now: .now) else { return }
        let topic = Array((Topic.readvertisePrefix + origin).utf8)
        logger.debug("the presence of \(origin) lists activities the cache lacks; asking it to advertise them again")
        _ = try frontend.trySend([1] + topic)
        _ = try frontend.trySend([0] + topic)
    }

    private func refuseForged(_ reason: String, key: [UInt8]?) {
        counters.forged += 1
        publishCounters()
        let name = key.flatMap { try? CurveKey(bytes: $0).z85 } ?? "(no CURVE)"
        guard loggedForgers.count < 10_000, loggedForgers.insert(name).inserted else { return }
        logger.warning("dropping a bus message from key \(name): it \(reason) (counted in forged; logged once per key)")
    }

    /// Counts (and logs, once per origin) a new activity dropped for its origin's quota.
    private func refuseOverQuota(_ advertisement: CachedAdvertisement) {
        counters.overQuota += 1
        publishCounters()
        guard loggedOverQuota.count < 10_000, loggedOverQuota.insert(advertisement.origin).inserted else { return }
        logger.warning("node \(advertisement.origin) advertises more than \(cache.perOriginQuota) activities: dropping its new ones (activity \(advertisement.activityID) first), counted in overQuota")
    }

    /// Subscribers → publishers: one (un)subscription.
    ///
    /// A snapshot subscription (wire.proto, "Snapshots") is a request to this broker: answered
    /// here, to that subscriber alone, and not forwarded. Plain subscriptions go to the publishers
    /// only without the cache (with it, the frontend subscribes to everything); nothing cached is
    /// re-sent on them.
    private func forwardUpstream(_ frames: [Frame]) throws(ZMQError) {
        let first = frames[0]
        var snapshot: (topic: [UInt8], typePrefix: String)?
        var isSnapshotTopic = false
        if frames.count == 1 {
            first.withUnsafeBytes { bytes in
                let topic = bytes.dropFirst()
                isSnapshotTopic = topic.starts(with: Topic.snapshotPrefixBytes)
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
        } else if !isSnapshotTopic && !cacheEnabled {
            // With the cache, the frontend subscribes to everything already: publishers hear
            // nothing of subscribers, and so nothing of joiners.
            try send(frames, to: frontend)
        }
    }


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
        let reply = envelopes.bytes(.snapshotReply(WireSnapshotReply(count: sent, typePrefix: typePrefix)))
        try send([topicFrame, Frame(reply)], to: backend)
        counters.snapshots += 1
        counters.snapshotAdvertisements += sent
        counters.messagesOut += 1
        counters.bytesOut += topic.count + reply.count
        publishCounters()
    }
}
