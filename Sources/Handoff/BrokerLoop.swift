import Dispatch
import Foundation
import HandoffWire
import Logging
import SwiftProtobuf
import Synchronization
import ZeroMQ

// MARK: - Shared between the caller and the loop thread

/// The resolved endpoints the loop thread reports once it has bound its sockets.
struct BoundEndpoints: Sendable {
    var frontend: String
    var backend: String
    var capture: String?
}

/// What the loop thread and the ``Broker`` handle share: only values under locks, and a group.
final class SharedState: Sendable {
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
final class BrokerLoop {
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
    /// The same counters, reported to swift-metrics.
    private var metrics = BrokerMetrics()
    /// Counts the handshakes ZAP allowed and refused (secure brokers): synchronized into the
    /// counters at most once a second.
    private let zap: ZAPHandler?
    private var nextHandshakeSync = ContinuousClock.now
    /// Whole messages from each side: a bus message is a topic and an envelope, a subscription
    /// one frame; anything much longer is dropped as it is read, and counted as malformed.
    private var frontendReader = MultipartReader(maxFrames: 4)
    private var backendReader = MultipartReader(maxFrames: 4)
    private let logger: Logger
    /// Origins whose refusal was logged (once each), bounded.
    private var loggedOverQuota: Set<String> = []
    /// Keys whose forgeries were logged (once each), bounded.
    private var loggedForgers: Set<String> = []
    /// Whether the broker runs CURVE, so that every message can be bound to its connection's key.
    private let secure: Bool
    /// Secure: monitors of the frontend, backend and capture for handshakes that fail before ZAP.
    private let handshakeMonitors: [SocketMonitor]
    private var lastHandshakeLog: ContinuousClock.Instant?
    /// Who signs the broker's own envelopes (snapshot replies): `broker@host`, with its key.
    private let identity: WireNodeRef
    private var sequence = UInt64(Date().timeIntervalSince1970 * 1_000_000)

    init(_ configuration: Broker.Configuration, context: Context, control endpoint: String, shared: SharedState, zap: ZAPHandler?) throws(ZMQError) {
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
        self.zap = zap
        let host = ProcessInfo.processInfo.hostName
        identity = NodeInfo(id: "broker@\(host)", name: "broker", host: host,
                            publicKey: configuration.security?.keyPair.publicKey).wire
        cacheEnabled = configuration.lastValueCache
        secure = configuration.security != nil
        cache = LastValueCache(
            capacity: configuration.cacheCapacity, perOriginQuota: configuration.maxActivitiesPerOrigin,
            defaultLease: configuration.defaultLease)
        var logger = Logger(label: "handoff.broker")
        logger[metadataKey: "broker"] = "\(configuration.frontend)"
        self.logger = logger
    }

    /// Closes every socket.
    func close() {
        for monitor in handshakeMonitors { monitor.stop() }
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
        let monitorIndices = handshakeMonitors.map { poller.add($0.socket, .readable) }
        while true {
            // Wake up for the next expiry, so the cache (and its counter) drops it on time, and
            // (secure) every second to take ZAP's handshake counts.
            var timeout = cache.nextExpiry.map { max(.zero, ContinuousClock.now.duration(to: $0)) }
            if zap != nil { timeout = min(timeout ?? .seconds(1), .seconds(1)) }
            let ready = try poller.poll(timeout: timeout)
            if ready[controlIndex].contains(.readable), try handleControl() { return }
            for (index, monitor) in zip(monitorIndices, handshakeMonitors) where ready[index].contains(.readable) {
                try noteFailedHandshake(monitor.next())
            }
            if ready[frontendIndex].contains(.readable) {
                var handled = 0
                while handled < Self.batch, try forwardDownstream() { handled += 1 }
            }
            if ready[backendIndex].contains(.readable) {
                var handled = 0
                while handled < Self.batch, try forwardUpstream() { handled += 1 }
            }
            if cache.removeExpired(now: .now) { publishCounters() }
            syncHandshakes()
        }
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
        guard handshakes.allowed != counters.allowedHandshakes || handshakes.refused != counters.refusedHandshakes else { return }
        counters.allowedHandshakes = handshakes.allowed
        counters.refusedHandshakes = handshakes.refused
        publishCounters()
    }

    /// Reads a control command; true to end the loop.
    private func handleControl() throws(ZMQError) -> Bool {
        guard let command = try control.tryReceive() else { return false }
        var frames = [command]
        while frames.last!.hasMore { frames.append(try control.receive()) }
        return command.string == Self.terminate
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
        let frames: [Frame]
        switch try frontendReader.next(from: frontend) {
        case .none: return false
        case .dropped:
            counters.messagesIn += 1
            counters.malformed += 1
            publishCounters()
            return true
        case .message(let message): frames = message
        }
        let size = frames.reduce(0) { $0 + $1.count }
        let content = Self.decodeBusMessage(frames)
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
            return true
        }
        if cacheEnabled {
            switch content {
            case .advertisement(let advertisement, _):
                if cache.store(advertisement, frames: frames, now: .now) == .overQuota {
                    refuseOverQuota(advertisement)
                    return true
                }
            case .withdrawal(let activityID, _):
                cache.remove(activityID)
            case .presence(let origin, let listed, let partial, let leaseMs, _):
                let lease = leaseMs > 0 ? Duration.milliseconds(leaseMs) : cache.defaultLease
                cache.renew(origin: origin, listed: listed, partial: partial, lease: lease, now: .now)
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

    /// Counts a handshake that failed before the account was even asked (a peer without CURVE, or
    /// one that could not prove the key it claims), and logs it at most once a minute.
    private func noteFailedHandshake(_ event: MonitorEvent) {
        counters.failedHandshakes += 1
        publishCounters()
        let now = ContinuousClock.now
        if let last = lastHandshakeLog, now - last < .seconds(60) { return }
        lastHandshakeLog = now
        logger.warning("refused a handshake at \(event.endpoint): the peer speaks no CURVE, or cannot prove its key (ZMTP error \(event.value)); \(counters.failedHandshakes) such so far, logged at most once a minute")
    }

    /// Counts (and logs, once per key) a message dropped because its sender is not who it says, or
    /// it publishes where only the broker may.
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

    /// Subscribers → publishers: one (un)subscription. False when none was waiting.
    ///
    /// A snapshot subscription (wire.proto, "Snapshots") is a request to this broker: answered
    /// here, to that subscriber alone, and not forwarded. Plain subscriptions go to the publishers
    /// only without the cache (with it, the frontend subscribes to everything); nothing cached is
    /// re-sent on them.
    private func forwardUpstream() throws(ZMQError) -> Bool {
        let frames: [Frame]
        switch try backendReader.next(from: backend) {
        case .none: return false
        case .dropped:
            counters.malformed += 1
            publishCounters()
            return true
        case .message(let message): frames = message
        }
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
        return true
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

    /// What a bus message (topic, envelope) carries, as far as the cache and the sender check
    /// are concerned.
    private enum BusContent {
        case advertisement(CachedAdvertisement, BusClaim)
        case withdrawal(activityID: String, BusClaim)
        case presence(origin: String, listed: Set<String>, partial: Bool, leaseMs: UInt32, BusClaim)
        case other(BusClaim)
        case malformed

        var claim: BusClaim? {
            switch self {
            case .advertisement(_, let claim), .withdrawal(_, let claim), .presence(_, _, _, _, let claim), .other(let claim): claim
            case .malformed: nil
            }
        }
    }

    /// Reads the few fields the cache and the sender check need from a bus message's envelope, in
    /// place (``WireBusSummary``: no copy of the frame, no decoding of the rest).
    private static func decodeBusMessage(_ frames: [Frame]) -> BusContent {
        guard frames.count == 2 else { return .malformed }
        return frames[1].withUnsafeBytes { bytes -> BusContent in
            guard let summary = try? WireBusSummary.read(bytes) else { return .malformed }
            var claim = BusClaim(senderID: summary.sender.id, senderKey: summary.sender.publicKey)
            switch summary.body {
            case .advertisement(let activityID, let origin, let version, let leaseMs, let expiresAt):
                claim.activityID = activityID
                claim.originID = origin.id
                claim.originKey = origin.publicKey
                return .advertisement(CachedAdvertisement(
                    activityID: activityID, origin: origin.id, originKey: origin.publicKey, version: version,
                    leaseMs: leaseMs, expiresAt: expiresAt), claim)
            case .withdrawal(let activityID, let origin):
                claim.activityID = activityID
                claim.originID = origin.id
                claim.originKey = origin.publicKey
                return .withdrawal(activityID: activityID, claim)
            case .presence(let node, let leaseMs, let activityIDs, let partial):
                claim.originID = node.id
                claim.originKey = node.publicKey
                return .presence(origin: node.id, listed: Set(activityIDs), partial: partial, leaseMs: leaseMs, claim)
            case .other:
                return .other(claim)
            }
        }
    }
}
