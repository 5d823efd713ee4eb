import Foundation
import HandoffWire
import Logging
import ServiceLifecycle
import SwiftProtobuf
import Synchronization
import ZeroMQ

/// One participant on the Handoff bus: advertises this process's current activities, discovers
/// other nodes' activities, answers continue requests, and continues activities from others.
///
/// One node per process is usual; many per host is normal. A node owns its ZeroMQ sockets: a
/// publisher on the bus (XPUB), a subscriber (SUB), a ROUTER where it answers continue requests,
/// and a DEALER per originator it continues from. All of them live on this actor.
///
/// ```swift
/// let node = try Node(configuration: .init(name: "laptop",
///     bus: .broker(frontend: "tcp://127.0.0.1:5555", backend: "tcp://127.0.0.1:5556")))
/// try await withThrowingDiscardingTaskGroup { group in
///     group.addTask { try await node.run() }
///     await node.setContinuationHandler(forType: "org.handoff.contacts.edit-contact") { activity in
///         print("restoring draft", activity.userInfo)
///     }
///     for await event in await node.discover(.type(prefix: "org.handoff.contacts.")) { ... }
/// }
/// ```
///
/// `run()` does the node's work until its task is cancelled or a graceful shutdown (it is a
/// swift-service-lifecycle `Service`); on the way out it withdraws every current activity.
public actor Node: Service {
    /// The node's configuration.
    public nonisolated let configuration: Configuration
    /// The node as other nodes see it.
    public nonisolated let info: NodeInfo
    /// The node's id.
    public nonisolated var id: String { info.id }
    /// The id as UTF-8, to recognise the node's own messages come back from the broker undecoded.
    nonisolated let idUTF8: [UInt8]
    /// Where this node answers continue requests, as advertised to others.
    public nonisolated let continuationEndpoint: String
    /// In direct mode, the endpoint peers subscribe to (with the port resolved); `nil` with a broker.
    public nonisolated let busEndpoint: String?

    let logger: Logger
    let context: Context
    /// The bus publisher: XPUB, so that it sees subscriptions (direct mode answers them at once).
    let publisher: Socket
    /// The bus subscribers: one connected to every broker; in direct mode one per peer, so that
    /// each message is known to come from that peer's connection (and, secure, its key).
    let subscribers: [Socket]
    /// Direct and secure: the key of each subscriber's peer, which every message on it must name as
    /// its sender; `nil` through brokers (the broker has checked each publisher's key).
    let subscriberKeys: [Data?]
    /// Where continue requests arrive.
    let server: Socket
    /// One DEALER per originator endpoint this node continues from.
    var clients: [String: Client] = [:]

    enum RunState { case idle, running, stopped }
    var runState = RunState.idle
    var runningWaiters: [CheckedContinuation<Void, Never>] = []

    /// The originating side: the activities current here, what the bus hears of them and when
    /// (``Advertiser``).
    var advertiser: Advertiser
    /// The following side: what this node knows of other nodes' activities and believes of
    /// what it hears (``Follower``).
    var follower: Follower
    /// When ignored input (malformed, foreign) was last logged: at most once a minute.
    var lastRateLimitedLog: ContinuousClock.Instant?
    /// The discover streams and the topics they follow (``Watchers``).
    var watchers = Watchers<AsyncStream<ActivityEvent>.Continuation>()
    weak var delegate: (any HandoffDelegate)?
    /// The continuing side: handlers, requests waiting for their originators, activities held
    /// for did-update (``ContinuationClient``).
    var continuing: ContinuationClient<ReplyWaiter, ContinuationHandler>
    /// This node's envelopes, with their sequence (``EnvelopeBuilder``).
    var envelopes: EnvelopeBuilder
    /// Open continuation stream pairs, with both kinds of peer, by key and by route (StreamTable).
    var streams = StreamTable<StreamSession>()
    var streamCountersStorage = StreamCounters() { didSet { counterMetrics.report(streamCountersStorage) } }
    var streamPressureProbes: [@Sendable () -> Int] = []
    var jobs: AsyncStream<@Sendable () async -> Void>.Continuation?
    /// The context's ZAP handler, while this node runs secure; released at shutdown.
    var zap: ZAPHandler?
    /// The ZAP domain of this node's server sockets.
    let zapDomain: String
    var securityCountersStorage = SecurityCounters() { didSet { counterMetrics.report(securityCountersStorage) } }
    /// Which refused handshakes at the server sockets are logged (per peer address and reason).
    var refusalLog = RefusalLog()
    /// What the node reports to swift-metrics (no-ops unless the process bootstrapped a backend).
    let metrics = NodeMetrics()
    var counterMetrics = NodeCounterMetrics()
    /// When the bus last proved it carries this node's messages: its own presence came back
    /// through a broker, or (direct) a peer's message arrived. See ``busHealth``.
    var lastBusProof: ContinuousClock.Instant?
    /// The connections of the bus sockets now (handshake done), from their monitors.
    var busConnections: Set<BusConnection> = []
    /// Monitors of the bus sockets that connect (to the broker, or to direct peers), to notice a
    /// server that refuses this node at the handshake, each with the socket it watches.
    var busMonitors: [(socket: Socket, monitor: SocketMonitor)] = []
    /// Secure: monitors of the sockets this node serves on (the continuation ROUTER, and the bus
    /// XPUB in direct mode), for handshakes that fail before ZAP is asked.
    var serverMonitors: [SocketMonitor] = []
    /// Why the bus refused this node at the handshake, once it has.
    public internal(set) var busRefusal: HandoffError?
    /// The security in force: the configuration's, with the account as last updated.
    var security: Security?
    /// Activities changed since the last publish (see ``activityDidChange(_:)``): a change to an
    /// activity already waiting costs nothing more, and one wake-up publishes them all.
    nonisolated let changedActivities = Mutex<Set<String>>([])
    nonisolated let changes: AsyncStream<Void>
    nonisolated let changesContinuation: AsyncStream<Void>.Continuation

    /// Creates a node and joins the bus (connects and binds its sockets); ``run()`` starts its work.
    ///
    /// - Parameters:
    ///   - configuration: Name, bus, endpoints and timing.
    ///   - context: The ZeroMQ context to use; a new one when `nil`.
    /// - Throws: ``ZMQError`` when an endpoint cannot be bound or connected.
    public init(configuration: Configuration, context: Context? = nil) throws {
        try Security.requireSecurity(
            for: configuration.endpoints, security: configuration.security,
            allowInsecure: configuration.allowInsecure, what: "node \(configuration.name)")
        let context = try context ?? Context()
        self.configuration = configuration
        self.context = context
        let host = ProcessInfo.processInfo.hostName
        let security = configuration.security
        self.security = security
        info = NodeInfo(
            id: configuration.id ?? UUID().uuidString, name: configuration.name, host: host,
            publicKey: security?.keyPair.publicKey)
        idUTF8 = Array(info.id.utf8)
        var logger = Logger(label: "handoff.node")
        logger[metadataKey: "node"] = "\(configuration.name)"
        self.logger = logger
        let snapshotAnswerers = switch configuration.bus {
        case .broker, .brokers: configuration.bus.brokerEndpoints?.count ?? 1
        case .direct(_, let peers): peers.count
        }
        var follower = Follower(.init(
            nodeID: info.id, includeOwnActivities: configuration.includeOwnActivities,
            defaultLease: configuration.effectiveLease, maxKnownPerNode: configuration.maxKnownActivitiesPerNode,
            maxKnown: configuration.maxKnownActivities, replayWindow: configuration.replayWindow,
            secure: configuration.security != nil, snapshotAnswerers: snapshotAnswerers))
        envelopes = EnvelopeBuilder(sender: info.wire)
        continuing = ContinuationClient(teamPolicy: configuration.teamPolicy, timeout: configuration.continueTimeout)

        // Every server socket of this node authenticates its clients against the account.
        zapDomain = "handoff.node.\(info.id)"
        if let security {
            let zap = try ZAPHandler.shared(for: context)
            zap.setPolicy(forDomain: zapDomain, security.zapPolicy(logger: logger, what: "node \(configuration.name)"))
            self.zap = zap
        }

        publisher = try context.socket(.xpub)
        // Every subscription is reported, also one already made by another subscriber: in direct
        // mode each peer's snapshot subscription; with brokers, each broker's subscribe-all, also
        // when a restarted broker of a pair subscribes while the other one still is.
        try publisher.set(.xpubVerbose, true)
        try publisher.set(.sendHighWaterMark, 100_000)
        try publisher.set(.linger, 1000)  // lets withdrawals sent at shutdown reach the bus
        // The contract's frame limit on the bus, both ways in (subscriptions come in on the publisher).
        try publisher.set(.maxMessageSize, Int64(WireLimits.maxBusFrame))
        func makeSubscriber() throws(ZMQError) -> Socket {
            let subscriber = try context.socket(.sub)
            try subscriber.set(.receiveHighWaterMark, 100_000)
            try subscriber.set(.maxMessageSize, Int64(WireLimits.maxBusFrame))
            return subscriber
        }
        switch configuration.bus {
        case .broker, .brokers:
            let subscriber = try makeSubscriber()
            if let security {
                guard let brokerKey = security.brokerKey else {
                    throw HandoffError(.invalidConfiguration, "node \(configuration.name) runs secure on a broker bus but has no broker key: name the broker's public key (its .pub file)")
                }
                try security.secureClient(publisher, serverKey: brokerKey)
                try security.secureClient(subscriber, serverKey: brokerKey)
            }
            busMonitors = [(publisher, try publisher.monitor(Self.handshakeEvents)), (subscriber, try subscriber.monitor(Self.handshakeEvents))]
            // Every broker gets every message: each one's XSUB subscribes to everything.
            for broker in configuration.bus.brokerEndpoints ?? [] {
                try publisher.connect(broker.frontend)
                try subscriber.connect(broker.backend)
            }
            subscribers = [subscriber]
            subscriberKeys = [nil]
            busEndpoint = nil
        case .direct(let listen, let peers):
            try security?.secureServer(publisher, domain: zapDomain)
            try publisher.bind(listen)
            busEndpoint = try publisher.lastEndpoint
            var subscribers: [Socket] = [], keys: [Data?] = []
            for peer in peers {
                let subscriber = try makeSubscriber()
                var key: CurveKey?
                if let security {
                    guard let peerKey = security.peerKeys[peer] else {
                        throw HandoffError(.invalidConfiguration, "node \(configuration.name) runs secure but has no public key for its peer \(peer)")
                    }
                    try security.secureClient(subscriber, serverKey: peerKey)
                    key = peerKey
                }
                busMonitors.append((subscriber, try subscriber.monitor(Self.handshakeEvents)))
                try subscriber.connect(peer)
                subscribers.append(subscriber)
                keys.append(key.map { Data($0.bytes) })
            }
            self.subscribers = subscribers
            subscriberKeys = keys
        }

        server = try context.socket(.router)
        // Streams bound what is in flight by credit; the send mark only keeps libzmq from dropping
        // it. The receive side is bounded so that a peer ignoring its credit fills a small queue
        // and then its own TCP window, not this process.
        let limits = ContinuationLimits(configuration)
        try server.set(.sendHighWaterMark, 10_000)
        try server.set(.receiveHighWaterMark, limits.receiveHighWaterMark)
        try server.set(.maxMessageSize, limits.maxMessageSize)
        try server.set(.heartbeatInterval, 1000)
        try server.set(.heartbeatTimeout, 3000)
        try security?.secureServer(server, domain: zapDomain)
        if security != nil {
            let served = if case .direct = configuration.bus { [server, publisher] } else { [server] }
            serverMonitors = try served.map { (socket: Socket) throws(ZMQError) -> SocketMonitor in
                try socket.monitor([.handshakeFailedProtocol, .handshakeFailedNoDetail, .handshakeFailedAuth])
            }
        }
        try server.bind(configuration.continuationEndpoint)
        continuationEndpoint = Self.advertisable(try server.lastEndpoint, host: configuration.advertisedHost ?? host)
        advertiser = Advertiser(.init(
            origin: info.wire, continueEndpoint: continuationEndpoint, lease: configuration.effectiveLease,
            teamID: configuration.teamID, advertiseInterval: configuration.advertiseInterval,
            refreshInterval: configuration.refreshInterval), now: .now)

        (changes, changesContinuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        // Presence keeps known activities alive (wire.proto, NodePresence).
        for subscriber in subscribers { for topic in Follower.standingSubscriptions { try subscriber.subscribe(topic) } }
        // The configuration's type prefixes are followed for the node's life, by no discover stream.
        var followed: [String] = []
        for prefix in configuration.subscriptions where watchers.follow(Topic.activityPrefix + prefix) { followed.append(prefix) }
        for case .subscribe(let topic) in follower.follow(followed) {
            for subscriber in subscribers { try subscriber.subscribe(topic) }
        }
        self.follower = follower
    }

    /// Replaces a wildcard host in a bound endpoint with one other nodes can reach.
    static func advertisable(_ endpoint: String, host: String) -> String {
        for wildcard in ["tcp://0.0.0.0:", "tcp://*:", "tcp://[::]:"] where endpoint.hasPrefix(wildcard) {
            return "tcp://\(host):" + endpoint.dropFirst(wildcard.count)
        }
        return endpoint
    }

    // MARK: Running

    /// Does the node's work — receiving advertisements, answering continue requests, sending presence,
    /// expiring what was not heard of — until the task is cancelled or the service group shuts down
    /// gracefully. Then withdraws every current activity and fails pending continuations.
    ///
    /// - Throws: ``HandoffError`` with ``HandoffError/Code-swift.struct/notRunning`` when run twice.
    public func run() async throws {
        guard runState == .idle else {
            throw HandoffError(.notRunning, "a node runs once; make a new node to join the bus again")
        }
        runState = .running
        for waiter in runningWaiters { waiter.resume() }
        runningWaiters.removeAll()
        logger.info("node running", metadata: [
            "id": "\(id)", "continuation": "\(continuationEndpoint)", "bus": "\(configuration.bus)",
        ])
        await cancelWhenGracefulShutdown {
            await self.runLoops()
        }
        shutDown()
    }

    private func runLoops() async {
        let (jobStream, jobContinuation) = AsyncStream.makeStream(of: (@Sendable () async -> Void).self)
        jobs = jobContinuation
        await withTaskCancellationHandler {
            await withDiscardingTaskGroup { group in
                for index in self.subscribers.indices { group.addTask { await self.receiveBus(index) } }
                group.addTask { await self.serveContinuations() }
                group.addTask { await self.answerSubscriptions() }
                group.addTask { await self.runSchedule() }
                group.addTask { await self.applyChanges() }
                for index in self.busMonitors.indices { group.addTask { await self.watchBusHandshakes(index) } }
                for index in self.serverMonitors.indices { group.addTask { await self.watchFailedHandshakes(index) } }
                for await job in jobStream { group.addTask { await job() } }
                group.cancelAll()
                // Jobs (delegates, plugin calls) may wait on a stream or a continue: end those now,
                // or the group would wait for them forever.
                self.failOutstanding()
            }
        } onCancel: {
            jobContinuation.finish()
        }
    }

    /// Runs `job` as part of the node's work (cancelled with it).
    func spawn(_ job: @escaping @Sendable () async -> Void) {
        jobs?.yield(job)
    }

    /// The node's clock: wakes often enough for leases and timeouts, and exactly when the
    /// advertiser's presence is due, and asks each part to expire what is due. Once per presence,
    /// the upkeep that needs no more (metrics, idle connections, old sequences).
    private func runSchedule() async {
        let sweep = min(configuration.effectiveLease / 4, configuration.streamIdleTimeout / 4,
                        configuration.continueTimeout / 4, .milliseconds(250))
        while !Task.isCancelled {
            do { try await Task.sleep(until: min(.now + sweep, advertiser.nextPresence), clock: .continuous) } catch { return }
            let now = ContinuousClock.now
            perform(follower.tick(now: now, date: Date()))
            expirePending(now: now)
            superviseStreams(now: now)
            let tick = advertiser.tick(now: now, date: Date())
            guard tick.presence else { continue }
            for activity in tick.expired { activity.detach() }
            publish((tick.note, tick.messages))
            metrics.state(streams: streams.count, current: advertiser.current.count, known: follower.known.count, onBus: busHealth.isOnBus)
            pruneClients()
            pruneSequences(now: now)
        }
    }

    /// Runs a node for the duration of `body`: starts it, hands it to `body`, and shuts it down after.
    public static func withRunning<Result: Sendable>(
        _ configuration: Configuration,
        context: Context? = nil,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (Node) async throws -> Result
    ) async throws -> Result {
        let node = try Node(configuration: configuration, context: context)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await node.run() }
            defer { group.cancelAll() }
            await node.untilRunning()
            return try await body(node)
        }
    }

    /// Returns once ``run()`` has started (at once if it has, or if the node already stopped).
    public func untilRunning() async {
        guard runState == .idle else { return }
        await withCheckedContinuation { runningWaiters.append($0) }
    }
}
