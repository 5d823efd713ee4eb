import Foundation
import HandoffExecutor
import HandoffWire
import Logging
import Synchronization
import ZeroMQ

/// The broker's shell: one thread of its own that owns the broker's sockets, waits on them with
/// `zmq_poll` (as libzmq's own `zmq_proxy` does), and carries out what ``BrokerCore`` decides.
///
/// A thread rather than a task on the event loops: the broker is the one part every message of a
/// deployment goes through, and a blocking poll that drains each ready socket without a task
/// switch, a readiness registration or a second waiter on any socket forwards at the transport's
/// speed (`handoff-bench broker-capacity`: with no per-message work, 1.2 µs of CPU per message on
/// one CPU against 2.2 µs for the same forwarding as an actor on the loops; a raw `zmq_proxy`
/// 0.8–1.0 µs). The thread sleeps in `zmq_poll` when there is nothing to do.
///
/// Sockets are made and bound in the initializer, on the caller's thread, before the thread
/// starts; from then on only the thread uses them, and it closes them when it ends. The monitors
/// of a secure broker (handshakes that fail before ZAP) are read by tasks of their own, which
/// hand their events over through ``Mailbox``; they stop before the thread closes the sockets.
final class BrokerLoop: @unchecked Sendable {
    // Invariant for @unchecked Sendable: everything but `mailbox`, `wake`, `exit` and the
    // immutable lets is touched only by the loop's thread once `start` has run.
    let endpoints: BoundEndpoints
    // Internal, not private: BrokerLoop+Upstream.swift carries out the upstream rules.
    let frontend: Socket
    let backend: Socket
    let capture: Socket?
    /// The links to upstream brokers (sites), with what this loop asked of them.
    let upstreamLinks: [UpstreamLink]
    /// The sockets whose monitors the handshake watch reads, in its order (frontend, backend,
    /// capture, the links' up then down sockets): a connection a monitor names arrives through it.
    let monitoredSockets: [Socket]
    var upstreamSnapshots: UpstreamSnapshots
    private let shared: SharedState
    let secure: Bool
    /// With CURVE: the keys of site brokers whose connections relay their nodes' messages.
    let relayKeys: Set<[UInt8]>
    /// The rules, in memory of their own (only this loop's thread uses them): a class's stored `var`
    /// is checked for exclusive access at run time at each use, three a message here; a pointee is not.
    private let coreStorage: UnsafeMutablePointer<BrokerCore>
    var core: BrokerCore {
        unsafeAddress { UnsafePointer(coreStorage) }
        unsafeMutableAddress { coreStorage }
    }
    /// Reads the core in place (each round of the loop): a read through `core` copies the whole
    /// core first, a reference count for each of its tables; an inout access is exclusive.
    func inPlace<Value>(_ read: (inout BrokerCore) -> Value) -> Value { read(&coreStorage.pointee) }
    /// The third frame of what this site's own publishers send, on the links to other sites.
    let localHop: Frame
    /// The same counters, reported to swift-metrics: once per round of the loop, not per message.
    private var metrics = BrokerMetrics()
    private var connectionKeys = ConnectionKeyReader()
    private let zap: ZAPHandler?
    private var nextHandshakeSync = ContinuousClock.now
    /// Whole messages from each side: a bus message is a topic and an envelope, a subscription
    /// one frame; anything much longer is dropped as it is read, and counted as malformed.
    private static let maxFrames = 4
    /// Messages taken from one socket before the other gets its turn.
    private static let burst = 256
    /// Each message as received, in place: the loop reads and passes it on before it takes the
    /// next, so receiving allocates nothing (`Frame`s, an array of them, per message).
    private let received = ReceivedMessage(capacity: maxFrames)
    let logger: Logger
    var refusals = BrokerRefusalLog()
    /// What each subscriber's connection holds at the backend, against the configuration's bounds.
    var subscriptionLedger: SubscriptionLedger<[UInt8]>
    /// The same for the capture's subscribers, with the same bounds.
    var captureLedger: SubscriptionLedger<[UInt8]>
    /// Monitors of the frontend, backend and capture (connections accepted; secure, handshakes that
    /// fail before ZAP), read by tasks of their own while the loop runs.
    private let connectionMonitors: [SocketMonitor]
    /// What each connection the loop reads from hands libzmq between whole messages: those accepted
    /// at the frontend, backend and capture, and the links' to their upstreams.
    var unfinishedMessages = UnfinishedMessageBound<[UInt8]>(bound: BrokerLoop.unfinishedMessageBound)
    /// The links' up and down sockets' monitors: a connection that came up.
    private let linkMonitors: [SocketMonitor], downLinkMonitors: [SocketMonitor]

    /// What other threads hand the loop: a request to stop, failed handshakes.
    private struct Mailbox {
        var stop = false
        var failedHandshakes: [MonitorEvent] = []
        /// Connections accepted or made, each with its peer as the kernel named it then, and the
        /// handshake monitor (of ``monitoredSockets``) that named it.
        var opened: [(connection: UnfinishedMessageBound<[UInt8]>.Opened, monitor: Int)] = []
        /// An upstream link's connection came up.
        var linkConnected = false
    }
    private let mailbox = Mutex(Mailbox())
    /// Wakes the loop's poll when something is put in the mailbox.
    private let wake = WakeSignal()
    /// Whether the loop has ended (its sockets closed), and who waits for that.
    private let exit = Mutex<(ended: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    init(_ configuration: Broker.Configuration, context: Context, shared: SharedState, zap: ZAPHandler?) throws(ZMQError) {
        let sockets = try BrokerSockets.open(configuration, context: context)
        (frontend, backend, capture) = (sockets.frontend, sockets.backend, sockets.capture)
        (upstreamLinks, connectionMonitors, endpoints) = (sockets.upstreamLinks, sockets.connectionMonitors, sockets.endpoints)
        (linkMonitors, downLinkMonitors) = (sockets.linkMonitors, sockets.downLinkMonitors)
        monitoredSockets = [frontend, backend] + (capture.map { [$0] } ?? []) + upstreamLinks.map(\.up) + upstreamLinks.map(\.down)
        self.shared = shared
        self.zap = zap
        secure = configuration.security != nil
        relayKeys = Set(configuration.relayKeys.map(\.bytes))
        subscriptionLedger = SubscriptionLedger(bounds: configuration.subscriptionBounds)
        captureLedger = SubscriptionLedger(bounds: configuration.subscriptionBounds)
        let host = ProcessInfo.processInfo.hostName
        let core = BrokerCore(
            cacheEnabled: configuration.lastValueCache,
            cache: LastValueCache(
                capacity: configuration.cacheCapacity, maxBytes: configuration.cacheBytes, perOriginQuota: configuration.maxActivitiesPerOrigin,
                perKeyQuota: configuration.effectiveMaxActivitiesPerKey, defaultLease: configuration.defaultLease),
            sender: NodeInfo(id: "broker@\(host)", name: "broker", host: host, publicKey: configuration.security?.keyPair.publicKey).wire,
            upstreams: configuration.upstreams.count, site: configuration.site ?? .random(), keysChecked: secure)
        coreStorage = .allocate(capacity: 1)
        coreStorage.initialize(to: core)
        localHop = WireSiteHop(hops: 1, origin: core.site.name, via: core.site).frame
        upstreamSnapshots = UpstreamSnapshots(site: core.site, upstreams: upstreamLinks.count)
        var logger = Logger(label: "handoff.broker")
        logger[metadataKey: "broker"] = "\(configuration.frontend)"
        self.logger = logger
    }

    deinit {
        coreStorage.deinitialize(count: 1)
        coreStorage.deallocate()
    }

    /// Starts the loop's thread; `onExit` runs on it last, once every socket is closed.
    func start(onExit: @escaping @Sendable () -> Void) {
        let thread = Thread { [self] in
            ThreadName.setCurrent("handoff-broker")
            // (gettid: /proc/thread-self names it, "PID/task/TID"; Glibc's module lacks gettid.)
            let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")).flatMap { Int32($0.split(separator: "/").last ?? "") }
            shared.threadID.store(me ?? 0, ordering: .releasing)
            let monitors = watchHandshakes()
            do throws(ZMQError) {
                try forward()
            } catch {
                shared.failure.withLock { $0 = error }
            }
            monitors.stop()
            close()
            onExit()
            let waiters = exit.withLock { state in
                state.ended = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Asks the loop to stop; ``ended()`` says when it has.
    func requestStop() {
        mailbox.withLock { $0.stop = true }
        wake.signal()
    }

    /// Returns once the loop has ended and closed its sockets.
    func ended() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ended = exit.withLock { state in
                if !state.ended { state.waiters.append(continuation) }
                return state.ended
            }
            if ended { continuation.resume() }
        }
    }

    private func close() {
        frontend.close()
        backend.close()
        capture?.close()
        for link in upstreamLinks {
            link.up.close()
            link.down.close()
        }
    }

    /// Polls and forwards until asked to stop, or a socket fails.
    private func forward() throws(ZMQError) {
        var poller = Poller()
        let frontendIndex = poller.add(frontend, .readable)
        let backendIndex = poller.add(backend, .readable)
        let wakeIndex = poller.add(fileDescriptor: wake.fileDescriptor, .readable)
        let upstreamIndices = upstreamLinks.map { (up: poller.add($0.up, .readable), down: poller.add($0.down, .readable)) }
        let captureIndex = capture.map { poller.add($0, .readable) }
        while true {
            let ready = try poller.poll(timeout: pollTimeout())
            if ready[wakeIndex].contains(.readable) {
                wake.drain()
                let (stop, failed, linkConnected, opened) = mailbox.withLock { mailbox in
                    defer { (mailbox.failedHandshakes, mailbox.linkConnected, mailbox.opened) = ([], false, []) }
                    return (mailbox.stop, mailbox.failedHandshakes, mailbox.linkConnected, mailbox.opened)
                }
                if stop { return }
                for (connection, monitor) in opened { watchForUnfinishedMessages(connection, monitor: monitor) }
                for event in failed { noteFailedHandshake(event) }
                if linkConnected { try upstreamLinkConnected() }
            }
            // Both directions until each is drained, a burst at a time.
            var more = true
            while more {
                more = false
                if ready[frontendIndex].contains(.readable) { more = try drain(frontend, from: .publishers) || more }
                if ready[backendIndex].contains(.readable) { more = try drain(backend, from: .subscribers) || more }
                for (link, indices) in zip(upstreamLinks, upstreamIndices) {
                    if ready[indices.up].contains(.readable) { more = try drain(link.up, from: .upstreamSubscriber) || more }
                    if ready[indices.down].contains(.readable) { more = try drain(link.down, from: .upstream) || more }
                }
                if let capture, let captureIndex, ready[captureIndex].contains(.readable) {
                    more = try drain(capture, from: .captureSubscribers) || more
                }
            }
            let now = ContinuousClock.now
            // A slice of the snapshots under way after the bus's bursts: the poll does not wait
            // while they last, and the bus's messages go between their slices.
            if inPlace({ $0.snapshotsUnderWay }) { try answerSnapshotSlice(now: now) }
            if let expiry = inPlace({ $0.nextExpiry }), expiry <= now, core.expire(now: now) { publishCounters() }
            syncHandshakes(now: now)
            if !upstreamLinks.isEmpty { try upstreamHousekeeping(now: now) }
            cutUnfinishedMessagesIfDue(now: now)
            // Both ledgers let go of the connections that have gone (libzmq let go of their subscriptions).
            subscriptionLedger.forgetGoneIfDue(now: now)
            captureLedger.forgetGoneIfDue(now: now)
            metrics.report(inPlace({ $0.counters }))
        }
    }

    /// Until the cache's next expiry or ZAP's next count, at most a second; none while snapshot
    /// answers are under way.
    private func pollTimeout() -> Duration {
        if inPlace({ $0.snapshotsUnderWay }) { return .zero }
        let now = ContinuousClock.now
        var deadline = now + .seconds(1)
        if let expiry = inPlace({ $0.nextExpiry }) { deadline = min(deadline, expiry) }
        if zap != nil { deadline = min(deadline, nextHandshakeSync) }
        if let due = inPlace({ $0.upstreamSubscriptions.nextDue }) { deadline = min(deadline, due) }
        if let due = upstreamSnapshots.nextRetry { deadline = min(deadline, due) }
        if let due = unfinishedMessages.nextCheckDue { deadline = min(deadline, due) }
        return max(.zero, now.duration(to: deadline))
    }

    /// Takes up to a burst of whole messages from `socket`; true when it stopped at the burst's end
    /// (more may be waiting).
    private func drain(_ socket: Socket, from source: Source) throws(ZMQError) -> Bool {
        // One reading of the clock for the burst (at most a millisecond or so): leases and rates
        // are counted in seconds, and the clock and its conversions were 3 % of the thread.
        let now = ContinuousClock.now
        for _ in 0..<Self.burst {
            guard try socket.tryReceive(into: received) else { return false }
            // Its share of libzmq's receive buffer let go at once (see ReceivedMessage.release).
            defer { received.release() }
            if let descriptor = received.sourceDescriptor { unfinishedMessages.delivered(on: descriptor) }
            if received.isOverlong {
                core.droppedOverlong(fromPublisher: source == .publishers)
                publishCounters()
                continue
            }
            switch source {
            case .publishers: try fromPublisher(received, now: now)
            case .subscribers: try fromSubscriber(received.frames())
            case .upstreamSubscriber: try fromUpstreamSubscriber(received.frames())
            case .upstream: try fromUpstream(received.frames())
            case .captureSubscribers: fromCaptureSubscriber(received.frames())
            }
        }
        return true
    }

    /// Publisher → subscribers: one message (three frames: a site's, sent up by its broker).
    private func fromPublisher(_ message: ReceivedMessage, now: ContinuousClock.Instant) throws(ZMQError) {
        if message.count == 3 {
            try fromSite(message.frames())
            return
        }
        // Every message is bound to the key that authenticated its connection (when secure).
        var connectionKey = secure && message.count == 2 ? message.withProperty("User-Id", ofFrame: 1) { connectionKeys.key(ofUserID: $0) } : nil
        // A site's broker relays its nodes' messages, each held to its node's key there.
        if let key = connectionKey, !relayKeys.isEmpty, relayKeys.contains(key) { connectionKey = nil }
        let verdict = core.publisherMessage(message, connectionKey: connectionKey, now: now)
        publishCounters()
        try carryOut(verdict, message, hop: localHop, fromSite: nil, connectionKey: connectionKey)
    }

    /// Forwards a publisher's message (to the subscribers, the capture, the sites below that
    /// follow it but the one it came from, and upstream), or logs why not.
    func carryOut(
        _ verdict: BrokerCore.PublisherVerdict, _ frames: some MessageFrames, hop: Frame, fromSite: String?, connectionKey: [UInt8]?
    ) throws(ZMQError) {
        switch verdict {
        case .forward(let askToReadvertise, let trace):
            let received = trace == nil ? nil : Date()
            if let origin = askToReadvertise { try askToAdvertiseAgain(origin) }
            // Too many origins lacking at once to ask one by one: every publisher at once.
            if core.takeReadvertiseEveryone() {
                logger.info("the presences of more than \(ReadvertiseRequests.defaultPerSecond) nodes in a second list activities the cache lacks; asking every node to advertise again")
                _ = try frontend.trySend([UInt8(1)])
            }
            // Stamped as it is handed on, not after: the subscriber it wakes may stamp its own
            // receipt before this thread reads the clock again.
            let forwarded = trace == nil ? nil : Date()
            if let capture { try send(frames, to: capture) }
            try sendToSites(frames, hop: hop, excluding: fromSite)
            for link in upstreamLinks { try send(frames, to: link.up, then: hop) }
            // Last, handing the received frames over: XPUB never blocks (at a subscriber's
            // high-water mark it drops for that subscriber only).
            try send(frames, to: backend, handingOver: true)
            if let trace, let received, let forwarded { try reportHops(trace, received: received, forwarded: forwarded) }
        case .forged(let reason):
            if let line = refusals.forged(reason, key: connectionKey) { logger.warning("\(line)") }
        case .overQuota(let activityID, let origin):
            if let line = refusals.overQuota(origin: origin, activityID: activityID, quota: core.cache.perOriginQuota) {
                logger.warning("\(line)")
            }
        case .overKeyQuota(let activityID, let key):
            if let line = refusals.overKeyQuota(key: key, activityID: activityID, quota: core.cache.perKeyQuota) {
                logger.warning("\(line)")
            }
        case .pastLengths(let reason):
            if let line = refusals.pastLengths(reason, key: connectionKey) { logger.warning("\(line)") }
        }
    }

    /// Sends frames as they are (libzmq shares their bytes), then `trailing` when given; false
    /// when the socket refused them. `handingOver` (their last send): a received message's frames
    /// go themselves, not copies of their references (two atomic counts and a close fewer a frame).
    @discardableResult
    func send(_ frames: some MessageFrames, to socket: Socket, then trailing: Frame? = nil, handingOver: Bool = false) throws(ZMQError) -> Bool {
        let last = frames.frameCount - 1
        for index in 0..<frames.frameCount {
            let more = index < last || trailing != nil
            guard try handingOver ? frames.trySendLast(frame: index, on: socket, more: more) : frames.trySend(frame: index, on: socket, more: more) else { return false }
        }
        if let trailing { return try socket.trySend(trailing) }
        return true
    }

    /// The counters where ``Broker/counters`` reads them: before each message is passed on, so
    /// that a subscriber that has a message finds it counted.
    func publishCounters() {
        publish(core.counters)
    }

    /// `counters` where ``Broker/counters`` reads them (a slice's answers' counts, as the core hands
    /// them over while it sends: ``publishCounters()`` would read the core it is changing).
    func publish(_ counters: Broker.Counters) {
        shared.counters.withLock { $0 = counters }
    }

    /// Takes ZAP's counts of allowed and refused handshakes into the counters, once a second.
    private func syncHandshakes(now: ContinuousClock.Instant) {
        guard let zap, now >= nextHandshakeSync else { return }
        nextHandshakeSync = now + .seconds(1)
        let handshakes = zap.counters(forDomain: Broker.zapDomain)
        if core.handshakes(allowed: handshakes.allowed, refused: handshakes.refused) { publishCounters() }
    }

    /// Counts a handshake that failed before the account was even asked (a peer without CURVE, or
    /// one that could not prove the key it claims) under its reason, and logs it at most once a
    /// minute per peer address and reason.
    private func noteFailedHandshake(_ event: MonitorEvent) {
        guard let reason = HandshakeRefusals.Reason(event) else { return }
        core.handshakeFailed(reason)
        publishCounters()
        if let line = refusals.handshake(reason, from: event.peerAddress, at: "the broker's \(event.endpoint)", now: .now) {
            logger.warning("\(line)")
        }
    }

    /// Reads each handshake monitor in a task of its own, handing its events to the loop.
    private func watchHandshakes() -> HandshakeMonitorWatch {
        let upLinks = connectionMonitors.count..<(connectionMonitors.count + linkMonitors.count)
        return HandshakeMonitorWatch(connectionMonitors + linkMonitors + downLinkMonitors) { [self] monitor, event in
            if event.kind == .accepted || event.kind == .connected {
                // Bounded as below: a connection past it is not watched.
                let connection = UnfinishedMessageBound.opened(event)
                mailbox.withLock { mailbox in
                    if let connection, mailbox.opened.count < 10_000 { mailbox.opened.append((connection, monitor)) }
                    if upLinks.contains(monitor) { mailbox.linkConnected = true }
                }
                wake.signal()
                return
            }
            // Bounded: a flood of failures beyond what the loop takes in a round is only counted
            // by ZAP's and the kernel's own means.
            mailbox.withLock { if $0.failedHandshakes.count < 10_000 { $0.failedHandshakes.append(event) } }
            wake.signal()
        }
    }
}
