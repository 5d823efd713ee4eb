import Foundation
import HandoffExecutor
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
    // The node's state: its protocol machines, which decide, and the parts of the shell that
    // carries their decisions out (Node/NodeParts.swift).

    /// The originating side: the activities current here, what the bus hears of them and when
    /// (``Advertiser``).
    var advertiser: Advertiser
    /// The following side: what this node knows of other nodes' activities and believes of
    /// what it hears (``Follower``).
    var follower: Follower
    /// The continuing side: handlers, requests waiting for their originators, activities held
    /// for did-update (``ContinuationClient``).
    var continuing: ContinuationClient<ReplyWaiter, ContinuationHandler>
    /// Open continuation stream pairs, with both kinds of peer, by key and by route (StreamTable).
    var streams = StreamTable<StreamSession>()
    /// This node's envelopes, with their sequence (``EnvelopeBuilder``).
    var envelopes: EnvelopeBuilder
    /// Who this node is (fixed when it is made).
    nonisolated let own: NodeIdentity
    var sockets: NodeSockets
    var lifecycle = NodeLifecycle()
    var access: NodeAccess
    var observability = NodeObservability()
    var listeners = NodeListeners()
    nonisolated let changeQueue = ChangeQueue()
    /// Up once the node's run is cancelled (``StoppingFlag``).
    nonisolated let stopping = StoppingFlag()

    /// The node's configuration.
    public nonisolated var configuration: Configuration { own.configuration }
    /// The node as other nodes see it.
    public nonisolated var info: NodeInfo { own.info }
    /// The node's id.
    public nonisolated var id: String { own.info.id }
    nonisolated var idUTF8: [UInt8] { own.idUTF8 }
    /// Where this node answers continue requests, as advertised to others.
    public nonisolated var continuationEndpoint: String { own.continuationEndpoint }
    /// In direct mode, the endpoint peers subscribe to (with the port resolved); `nil` with a broker.
    public nonisolated var busEndpoint: String? { own.busEndpoint }
    nonisolated var logger: Logger { own.logger }
    var context: Context { sockets.context }
    var publisher: Socket { sockets.publisher }
    var subscribers: [Socket] { sockets.subscribers }
    var subscriberKeys: [Data?] { sockets.subscriberKeys }
    var server: Socket { sockets.server }
    var metrics: NodeMetrics { observability.metrics }
    var zapDomain: String { access.zapDomain }
    /// The security in force: the configuration's, with the account as last updated.
    var security: Security? {
        get { access.security }
        set { access.security = newValue }
    }
    var delegate: (any HandoffDelegate)? {
        get { listeners.delegate }
        set { listeners.delegate = newValue }
    }
    /// Why the bus refused this node at the handshake, once it has.
    public var busRefusal: HandoffError? { sockets.busRefusal }

    /// Creates a node and joins the bus (connects and binds its sockets); ``run()`` starts its work.
    ///
    /// - Parameters:
    ///   - configuration: Name, bus, endpoints and timing.
    ///   - context: The ZeroMQ context to use; a new one when `nil`.
    /// - Throws: ``ZMQError`` when an endpoint cannot be bound or connected.
    public init(configuration: Configuration, context: Context? = nil) throws {
        try configuration.check()
        try Security.requireSecurity(
            for: configuration.endpoints, security: configuration.security,
            allowInsecure: configuration.allowInsecure, what: "node \(configuration.name)")
        let context = try context ?? Context()
        let host = ProcessInfo.processInfo.hostName
        let security = configuration.security
        let info = NodeInfo(
            id: configuration.id ?? UUID().uuidString, name: configuration.name, host: host,
            publicKey: security?.keyPair.publicKey)
        var logger = Logger(label: "handoff.node")
        logger[metadataKey: "node"] = "\(configuration.name)"
        let snapshotAnswerers = switch configuration.bus {
        case .broker, .brokers: configuration.bus.brokerEndpoints?.count ?? 1
        case .direct(_, let peers): peers.count
        }
        var follower = Follower(.init(
            nodeID: info.id, includeOwnActivities: configuration.includeOwnActivities,
            defaultLease: configuration.effectiveLease, maxKnownPerNode: configuration.maxKnownActivitiesPerNode,
            maxKnown: configuration.maxKnownActivities, replayWindow: configuration.replayWindow,
            secure: configuration.security != nil, snapshotAnswerers: snapshotAnswerers, maxKnownBytes: configuration.maxKnownActivityBytes))
        envelopes = EnvelopeBuilder(sender: info.wire)
        continuing = ContinuationClient(teamPolicy: configuration.teamPolicy, timeout: configuration.continueTimeout)

        // Every server socket of this node authenticates its clients against the account.
        let zapDomain = "handoff.node.\(info.id)"
        var zap: ZAPHandler?
        if let security {
            zap = try ZAPHandler.shared(for: context)
            zap?.setPolicy(forDomain: zapDomain, security.zapPolicy(logger: logger, what: "node \(configuration.name)"))
        }
        access = NodeAccess(security: security, zap: zap, zapDomain: zapDomain)

        let publisher = try context.socket(.xpub)
        // Every subscription is reported, also one already made by another subscriber: in direct
        // mode each peer's snapshot subscription; with brokers, each broker's subscribe-all, also
        // when a restarted broker of a pair subscribes while the other one still is.
        try publisher.set(.xpubVerbose, true)
        try publisher.set(.sendHighWaterMark, 100_000)
        try publisher.set(.linger, 1000)  // lets withdrawals sent at shutdown reach the bus
        // Its waiter reads subscriptions (a broker's subscribe-all, R: requests, snapshot and trace
        // requests), which can take 10 ms now and then; its sends are every advertisement
        // (ZeroMQ's Socket.wakeOtherWaiters(afterSending:flags:)).
        publisher.coalescesReadingsAfterSends = true
        // Only subscriptions come in on the publisher: a peer sending a larger frame is cut off
        // before libzmq keeps it (each distinct one stays in its trie while the peer is connected).
        try publisher.set(.maxMessageSize, Int64(WireLimits.maxSubscriptionFrame))
        // And one at a time (``publisherSubscriptionQueue``).
        try publisher.set(.receiveHighWaterMark, Self.publisherSubscriptionQueue)
        func makeSubscriber() throws(ZMQError) -> Socket {
            let subscriber = try context.socket(.sub)
            try subscriber.set(.receiveHighWaterMark, 100_000)
            // Subscriptions leave through the send queue, each as it is made and all again when
            // the connection comes back: at libzmq's default of 1,000 a node following more lost
            // the rest, with no error (ManySubscriptionsTests).
            try subscriber.set(.sendHighWaterMark, 100_000)
            try subscriber.set(.maxMessageSize, Int64(WireLimits.maxBusFrame))
            return subscriber
        }
        var busMonitors: [(socket: Socket, monitor: SocketMonitor)] = []
        let subscribers: [Socket], subscriberKeys: [Data?], busEndpoint: String?
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
            var made: [Socket] = [], keys: [Data?] = []
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
                made.append(subscriber)
                keys.append(key.map { Data($0.bytes) })
            }
            subscribers = made
            subscriberKeys = keys
        }

        let server = try context.socket(.router)
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
        // Each connection accepted, watched for messages that never end (Node+UnfinishedMessages);
        // secure, also the handshakes that fail before ZAP is asked.
        let served = if case .direct = configuration.bus { [server, publisher] } else { [server] }
        let watched: MonitorEvents = security == nil ? [.accepted] : [.accepted, .handshakeFailedProtocol, .handshakeFailedNoDetail, .handshakeFailedAuth]
        let serverMonitors = try served.map { (socket: Socket) throws(ZMQError) -> SocketMonitor in try socket.monitor(watched) }
        try server.bind(configuration.continuationEndpoint)
        let continuationEndpoint = Self.advertisable(try server.lastEndpoint, host: configuration.advertisedHost ?? host)
        own = NodeIdentity(
            configuration: configuration, info: info, idUTF8: Array(info.id.utf8), continuationEndpoint: continuationEndpoint,
            busEndpoint: busEndpoint, logger: logger)
        sockets = NodeSockets(
            context: context, publisher: publisher, subscribers: subscribers, subscriberKeys: subscriberKeys, server: server,
            busMonitors: busMonitors, serverMonitors: serverMonitors,
            unfinishedMessages: UnfinishedMessageBound(bound: Self.unfinishedMessageBound(limits)))
        advertiser = Advertiser(.init(
            origin: info.wire, continueEndpoint: continuationEndpoint, lease: configuration.effectiveLease,
            teamID: configuration.teamID, advertiseInterval: configuration.advertiseInterval,
            refreshInterval: configuration.refreshInterval), now: .now)

        // Presence keeps known activities alive (wire.proto, NodePresence).
        for subscriber in subscribers { for topic in Follower.standingSubscriptions { try subscriber.subscribe(topic) } }
        // The configuration's type prefixes are followed for the node's life, by no discover stream.
        var followed: [String] = []
        for prefix in configuration.subscriptions where listeners.watchers.follow(Topic.activityPrefix + prefix) { followed.append(prefix) }
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
        guard lifecycle.runState == .idle else {
            throw HandoffError(.notRunning, "a node runs once; make a new node to join the bus again")
        }
        // The node's jobs are taken from here on: before anyone hears that it runs. A caller that
        // `untilRunning()` resumed may reach the node before `runLoops` does (the hops through
        // `cancelWhenGracefulShutdown`), and a job spawned with nowhere to go was dropped: a
        // continue's DEALER then had no reader, and every continue to that originator timed out.
        let (jobStream, jobContinuation) = AsyncStream.makeStream(of: (@Sendable () async -> Void).self)
        lifecycle.jobs = jobContinuation
        lifecycle.runState = .running
        for waiter in lifecycle.runningWaiters { waiter.resume() }
        lifecycle.runningWaiters.removeAll()
        own.logger.info("node running", metadata: [
            "id": "\(id)", "continuation": "\(continuationEndpoint)", "bus": "\(own.configuration.bus)",
        ])
        await cancelWhenGracefulShutdown {
            await self.runLoops(jobStream, jobContinuation)
        }
        shutDown()
    }

    /// Runs the node's receivers, its schedule and the jobs `jobStream` brings, until cancelled.
    private func runLoops(
        _ jobStream: AsyncStream<@Sendable () async -> Void>, _ jobContinuation: AsyncStream<@Sendable () async -> Void>.Continuation
    ) async {
        // The node's child tasks (its receivers, its jobs: delegates, plugin calls) prefer the
        // process's event loops, whoever called run(): the node, an actor with no executor of its
        // own, runs where they run.
        await withTaskExecutorPreference(EventLoops.shared) {
            await withDiscardingTaskGroup { group in
                for index in self.subscribers.indices { group.addTask { await self.receiveBus(index) } }
                group.addTask { await self.serveContinuations() }
                group.addTask { await self.answerSubscriptions() }
                group.addTask { await self.runSchedule() }
                group.addTask { await self.applyChanges() }
                for index in self.sockets.busMonitors.indices { group.addTask { await self.watchBusHandshakes(index) } }
                for index in self.sockets.serverMonitors.indices { group.addTask { await self.watchFailedHandshakes(index) } }
                group.addTask { await self.cutUnfinishedMessages() }
                // The handler sits inside the group: a task's cancellation runs its newest handler
                // first, so the flag is up before any job is cancelled (outside the group, a job's
                // reader that stopped reached the node first in 12 runs of 2,000).
                await withTaskCancellationHandler {
                    for await job in jobStream { group.addTask { await job() } }
                } onCancel: {
                    self.stopping.raise()
                    jobContinuation.finish()
                }
                group.cancelAll()
                // Jobs (delegates, plugin calls) may wait on a stream or a continue: end those now,
                // or the group would wait for them forever.
                self.failOutstanding()
            }
        }
    }

    /// Runs `job` as part of the node's work (cancelled with it).
    func spawn(_ job: @escaping @Sendable () async -> Void) {
        lifecycle.jobs?.yield(job)
    }

    /// The node's clock: wakes often enough for leases and timeouts, and exactly when the
    /// advertiser's presence is due, and asks each part to expire what is due. Once per presence,
    /// the upkeep that needs no more (metrics, idle connections, old sequences).
    private func runSchedule() async {
        let sweep = own.configuration.tickInterval
        while !Task.isCancelled {
            do { try await EventLoops.sleep(until: min(.now + sweep, advertiser.nextDue)) } catch { return }
            let now = ContinuousClock.now
            perform(follower.tick(now: now, date: Date()))
            expirePending(now: now)
            superviseStreams(now: now)
            let tick = advertiser.tick(now: now, date: Date(), traffic: observability.metrics.totals)
            for activity in tick.expired { activity.detach() }
            // Published before the presence check: a slice of a pass over every activity comes
            // without a presence.
            publish((tick.note, tick.messages))
            guard tick.presence else { continue }
            observability.metrics.state(streams: streams.liveCount, current: advertiser.current.count, known: follower.known.count, onBus: busHealth.isOnBus)
            pruneClients()
            pruneSequences(now: now)
            countAllowedHandshakes()
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
        guard lifecycle.runState == .idle else { return }
        await withCheckedContinuation { lifecycle.runningWaiters.append($0) }
    }
}
