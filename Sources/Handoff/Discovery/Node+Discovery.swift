import Foundation
import HandoffWire
import Logging
import ZeroMQ

/// Discovery: the activities other nodes advertise, as this node learns of them from the bus and
/// from snapshots — who watches which type prefixes, leases, replay protection and quotas.
extension Node {
    // MARK: Discovery

    /// Activities other nodes advertise, as they appear, change and go.
    ///
    /// The stream starts with an ``ActivityEvent/appeared(_:)`` for every matching activity already
    /// known. Type prefixes are filtered by ZeroMQ itself: the node subscribes only to what some
    /// discovery stream (or ``Configuration-swift.struct/subscriptions``) asks for. The stream ends when
    /// the node stops; stop iterating to unsubscribe.
    public func discover(_ filter: ActivityFilter = .all) -> AsyncStream<ActivityEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: ActivityEvent.self)
        guard runState != .stopped else {
            continuation.finish()
            return stream
        }
        let watcherID = UUID()
        let followed = watchers.add(watcherID, filter: filter, sink: continuation)
        if !followed.isEmpty { resynchronization.followingChanged() }
        for topic in followed { startFollowing(topic) }
        for entry in known.values where filter.matches(entry.activity) {
            continuation.yield(.appeared(entry.activity))
        }
        continuation.onTermination = { [weak self] _ in
            Task { await self?.removeWatcher(watcherID) }
        }
        return stream
    }

    /// The activities this node knows of right now, matching `filter`.
    public func activities(matching filter: ActivityFilter = .all) -> [DiscoveredActivity] {
        known.values.map(\.activity).filter(filter.matches).sorted { $0.activityType < $1.activityType }
    }

    func removeWatcher(_ id: UUID) {
        for topic in watchers.remove(id) { stopFollowing(topic) }
    }

    /// Subscribes to a topic its first follower follows, and asks for the type prefix's snapshot.
    func startFollowing(_ topic: String) {
        subscribe(topic)
        requestSnapshot(typePrefix: String(topic.dropFirst(Topic.activityPrefix.count)))
    }

    /// Asks for a snapshot of `typePrefix`: subscribes to a fresh snapshot topic (the request).
    func requestSnapshot(typePrefix: String, attempt: Int = 1) {
        guard snapshots.expectedReplies > 0 else { return }
        let topic = snapshots.start(typePrefix: typePrefix, attempt: attempt)
        subscribe(topic)
    }

    /// Takes a message that arrived on a snapshot topic.
    func handleSnapshot(topic: String, _ envelope: WireEnvelope) {
        switch envelope.body {
        case .advertisement:
            guard snapshots.advertisementArrived(on: topic) else { return }
            handleBus(envelope)
        case .snapshotReply(let reply):
            finishSnapshot(topic: topic, snapshots.replyArrived(on: topic, count: Int(reply.count)))
        default:
            logger.debug("ignoring a \(String(describing: envelope.body)) on snapshot topic \(topic)")
        }
    }

    /// Acts on what a snapshot's answers came to: unsubscribes from its topic once it is over,
    /// and asks again when it arrived short.
    func finishSnapshot(topic: String, _ outcome: SnapshotRequests.Outcome) {
        switch outcome {
        case .waiting, .unknown:
            return
        case .complete:
            break
        case .retry(let typePrefix, let attempt):
            logger.warning("the snapshot of \"\(typePrefix)\" arrived incomplete; asking again (attempt \(attempt))")
            requestSnapshot(typePrefix: typePrefix, attempt: attempt)
        case .incomplete(let received, let promised):
            logger.warning("a snapshot arrived incomplete again (\(received) of \(promised)); the refresh of each activity fills the rest")
        }
        unsubscribe(topic)
    }

    /// Ends the snapshots some answerers replied to a second ago while others never did (one
    /// broker of a pair down, a direct peer gone).
    func expireSnapshots(now: ContinuousClock.Instant) {
        for (topic, outcome) in snapshots.expire(now: now, grace: .seconds(1)) {
            logger.debug("snapshot \(topic): not every answerer replied; going on with what arrived")
            finishSnapshot(topic: topic, outcome)
        }
    }

    /// Whether every snapshot this node asked for has arrived: it knows what was current when it
    /// started to follow each type prefix.
    public var isSynchronized: Bool { snapshots.isEmpty }

    /// Waits until ``isSynchronized``, at most `timeout`; returns whether it is.
    public func untilSynchronized(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !snapshots.isEmpty, ContinuousClock.now < deadline, runState != .stopped {
            do { try await Task.sleep(for: .milliseconds(5)) } catch { break }
        }
        return snapshots.isEmpty
    }

    /// Unsubscribes from a topic its last follower left, and ends the snapshots asked for it.
    func stopFollowing(_ topic: String) {
        unsubscribe(topic)
        for snapshot in snapshots.cancel(typePrefix: String(topic.dropFirst(Topic.activityPrefix.count))) {
            unsubscribe(snapshot)
        }
    }

    func emit(_ event: ActivityEvent) {
        // The watchers' tasks run next on this loop thread, once the node's current job (usually
        // `receiveBus`) suspends, rather than waking another thread for every event; `receiveBus`
        // yields every `ReceiveBurst.limit` messages, so that they run under a sustained flow too.
        EventLoops.handingOff {
            for sink in watchers.sinks(for: event.activity) { sink.yield(event) }
        }
    }

    /// Subscribes every bus subscriber to `topic`.
    func subscribe(_ topic: String) {
        for subscriber in subscribers {
            do { try subscriber.subscribe(topic) } catch { logger.warning("subscribe \(topic): \(error)") }
        }
    }

    /// Unsubscribes every bus subscriber from `topic`.
    func unsubscribe(_ topic: String) {
        for subscriber in subscribers {
            do { try subscriber.unsubscribe(topic) } catch { logger.warning("unsubscribe \(topic): \(error)") }
        }
    }

    /// Reads bus subscriber `index`: in direct mode one peer's messages, which (secure) must name
    /// that peer's key as their sender.
    func receiveBus(_ index: Int) async {
        let subscriber = subscribers[index]
        let connectionKey = subscriberKeys[index]
        var burst = ReceiveBurst()
        while !Task.isCancelled {
            await burst.next()
            let received: [Frame]?
            do {
                received = try await subscriber.receiveMultipart(maxFrames: 2)
            } catch {
                return  // cancelled, or the socket closed
            }
            if let frames = received { metrics.received(on: .bus, bytes: frames.reduce(0) { $0 + $1.count }) }
            guard let frames = received, frames.count == 2 else {
                noteMalformed(bus: true, "a bus message of \(received.map { "\($0.count)" } ?? "more than 2") frames (expected topic and envelope)")
                continue
            }
            // Our own advertisements and withdrawals, come back through the broker: dropped
            // before any decoding (handleBus would drop them after it).
            if !configuration.includeOwnActivities, frames[1].withUnsafeBytes({ WireOwnEcho.matches($0, nodeID: idUTF8) }) {
                continue
            }
            do {
                let envelope = try WireEnvelope.decode(frames[1].data)
                if let connectionKey, envelope.sender.publicKey != connectionKey {
                    securityCountersStorage.foreignIgnored += 1
                    logRateLimited("ignoring a bus message from a direct peer that names another key as its sender")
                    continue
                }
                let topic = frames[0].bytes
                if topic.starts(with: Topic.snapshotPrefixBytes) {
                    handleSnapshot(topic: String(decoding: topic, as: UTF8.self), envelope)
                } else {
                    handleBus(envelope)
                }
            } catch {
                noteMalformed(bus: true, "a bus message that is not an envelope: \(error)")
            }
        }
    }

    /// Counts malformed input from the bus or the continuation sockets, and logs it (rate-limited).
    func noteMalformed(bus: Bool, _ what: String) {
        if bus { securityCountersStorage.malformedBus += 1 } else { securityCountersStorage.malformedContinuation += 1 }
        logRateLimited("ignoring malformed input: \(what)")
    }

    /// Logs what a peer made this node ignore at most once a minute, with the counters so far, so
    /// that a peer sending garbage or lies cannot flood the log (every case is counted).
    func logRateLimited(_ message: String) {
        let now = ContinuousClock.now
        if let last = lastRateLimitedLog, now - last < .seconds(60) { return }
        lastRateLimitedLog = now
        let counters = securityCountersStorage
        logger.warning("\(message) (so far: \(counters.malformedBus) malformed on the bus, \(counters.malformedContinuation) on the continuation sockets, \(counters.foreignIgnored) foreign, \(counters.replayedIgnored) replayed, \(counters.staleIgnored) stale, \(counters.handshakeRefusals.total) refused handshakes; logged at most once a minute)")
    }

    func handleBus(_ envelope: WireEnvelope) {
        switch envelope.body {
        case .advertisement(let advertisement):
            // Our own, come back through the broker: nothing to do (and nothing to remember).
            guard configuration.includeOwnActivities || advertisement.origin.nodeID != id else { return }
            guard believe(envelope, origin: advertisement.origin, activityID: advertisement.activityID) else { return }
            let activity = DiscoveredActivity(wire: advertisement)
            if let expiration = activity.expirationDate, expiration <= Date() {
                forget(activity.id, reason: .expired)
                return
            }
            let now = ContinuousClock.now
            switch known.arrive(activity, deadline: now + activity.lease, now: now) {
            case .appeared:
                emit(.appeared(activity))
                refreshIfHeld(activity)
            case .updated:
                emit(.updated(activity))
                refreshIfHeld(activity)
            case .renewed, .stale:
                break
            case .overQuota(let ofOrigin, let total):
                securityCountersStorage.overQuotaIgnored += 1
                let origin = activity.origin.id
                if loggedOverQuota.count < 10_000, loggedOverQuota.insert(origin).inserted {
                    logger.warning("ignoring new activities of node \(activity.origin.name) (\(origin)) beyond the quota: \(ofOrigin) known of it, \(total) in all (maxKnownActivitiesPerNode \(configuration.maxKnownActivitiesPerNode), maxKnownActivities \(configuration.maxKnownActivities))")
                }
            }
        case .withdrawal(let withdrawal):
            guard configuration.includeOwnActivities || withdrawal.origin.nodeID != id else { return }
            guard believe(envelope, origin: withdrawal.origin, activityID: withdrawal.activityID) else { return }
            forget(withdrawal.activityID, reason: RemovalReason(wire: withdrawal.reason))
        case .nodePresence(let presence):
            if presence.node.nodeID == id { lastBusProof = .now }
            guard configuration.includeOwnActivities || presence.node.nodeID != id else { return }
            // Replay protection as for an activity, under a name no activity id can have.
            guard believe(envelope, origin: presence.node, activityID: Self.presenceKey) else { return }
            let lease = presence.leaseMs > 0 ? Duration.milliseconds(presence.leaseMs) : configuration.effectiveLease
            directory.heard(presence, lease: lease, now: .now)
            let listed = Set(presence.activityIds)
            let unlisted = known.renew(origin: presence.node.nodeID, listed: listed, partial: presence.partial, deadline: .now + lease)
            for id in unlisted { forget(id, reason: .lost) }
            resynchronize(afterPresenceOf: presence.node.nodeID, listing: listed)
        default:
            break
        }
    }

    /// Where replay protection keeps a node's presence (activity ids are never empty).
    static let presenceKey = ""

    /// Whether to believe a bus envelope about an activity (or a presence): ``BusBelief`` decides
    /// (the origin speaks for its activity, with its key when secure; replay protection); this
    /// counts and logs what it refused.
    func believe(_ envelope: WireEnvelope, origin: WireNodeRef, activityID: String) -> Bool {
        let claim = BusBelief.Claim(
            senderNodeID: envelope.sender.nodeID, senderKey: envelope.sender.publicKey, originNodeID: origin.nodeID,
            originKey: origin.publicKey, subject: activityID, sequence: envelope.sequence,
            sentAt: envelope.hasSentAt ? envelope.sentAt.date : nil)
        let knownKey = belief.secure ? known[activityID].map { $0.activity.origin.publicKey.map { Data($0.bytes) } ?? Data() } : nil
        switch belief.judge(claim, knownKey: knownKey) {
        case .believed:
            return true
        case .foreign(let why):
            securityCountersStorage.foreignIgnored += 1
            logRateLimited("ignoring \(why)")
            return false
        case .stale(let age):
            securityCountersStorage.staleIgnored += 1
            logger.debug("ignoring a stale bus message about \(activityID): sent \(age.isFinite ? "\(Int(age)) s ago" : "with no time") (window \(configuration.replayWindow))")
            return false
        case .replayed:
            securityCountersStorage.replayedIgnored += 1
            return false
        }
    }

    /// Drops replay-protection entries older than the window (``ReplayGuard/prune(now:)``).
    func pruneSequences(now: ContinuousClock.Instant) {
        belief.replayGuard.prune(now: now)
    }

    /// What this node's security refused or ignored.
    public struct SecurityCounters: Sendable, Hashable {
        /// Handshakes the ZAP handler allowed on this node's server sockets.
        public var allowedHandshakes = 0
        /// Bus messages ignored because this node already believed one as new about the same
        /// activity: replays, and the harmless duplicates of a broker's cache replay.
        public var replayedIgnored = 0
        /// Bus messages ignored as too old (or too far in the future) for the replay window.
        public var staleIgnored = 0
        /// Bus messages about an activity sent by a node other than its origin.
        public var foreignIgnored = 0
        /// Handshakes refused at this node's server sockets, by reason: keys not in the account
        /// (ZAP), and those that failed before the account was asked — peers without CURVE, peers
        /// that cannot prove the key they claim. Each is also logged, at most once a minute per peer
        /// address and reason.
        public var handshakeRefusals = HandshakeRefusals()
        /// Bus messages that were not a topic and one envelope this node can decode.
        public var malformedBus = 0
        /// Messages at the continuation sockets (requests, replies, stream frames) that were not
        /// well-formed: too many frames, not an envelope, or not what the socket carries.
        public var malformedContinuation = 0
        /// New activities ignored because their origin (or all origins together) had the quota
        /// known here already (``Configuration-swift.struct/maxKnownActivitiesPerNode``).
        public var overQuotaIgnored = 0

        public init() {}
    }

    /// What this node's security refused or ignored so far.
    public var securityCounters: SecurityCounters {
        var counters = securityCountersStorage
        if let zap {
            let handshakes = zap.counters(forDomain: zapDomain)
            counters.allowedHandshakes = handshakes.allowed
        }
        return counters
    }

    func forget(_ id: String, reason: RemovalReason) {
        guard let activity = known.remove(id) else { return }
        held.release(id)
        emit(.removed(activity, reason))
    }

    /// The nodes on the bus, as their presence says (this one not included), by name.
    public func nodes() -> [PresentNode] {
        directory.nodes
    }

    func expireKnown(now: ContinuousClock.Instant) {
        directory.expire(now: now)
        for (id, reason) in known.due(now: now, wallClock: Date()) { forget(id, reason: reason) }
    }
}
