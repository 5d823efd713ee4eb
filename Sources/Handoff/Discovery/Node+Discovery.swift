import Foundation
import HandoffExecutor
import HandoffWire
import Logging
import ZeroMQ

/// Discovery, carried out: the node reads the bus, hands each message to its ``Follower``, and
/// does what it decides (events to the discover streams, subscriptions, counters and logs).
extension Node {
    // MARK: Discovery

    /// Activities other nodes advertise, as they appear, change and go.
    ///
    /// The stream starts with an ``ActivityEvent/appeared(_:)`` for every matching activity already
    /// known. Type prefixes are filtered by ZeroMQ itself: the node subscribes only to what some
    /// discovery stream (or ``Configuration-swift.struct/subscriptions``) asks for. The stream ends when
    /// the node stops; stop iterating to unsubscribe. It also ends, after the events it holds, when
    /// its reader falls more than ``Configuration-swift.struct/maxDiscoverBacklog`` events behind:
    /// discover again to start over from what the node knows then. ``hasStopped`` tells which of
    /// the two ended it.
    public func discover(_ filter: ActivityFilter = .all) -> AsyncStream<ActivityEvent> {
        // Bounded: the bus decides how many events come, and a reader that stopped reading would
        // otherwise hold every one of them. Room for the first listing and the backlog after it.
        // A channel of its own, not `AsyncStream.makeStream`: see DiscoverChannel for why.
        let channel = DiscoverChannel(capacity: follower.known.count + max(own.configuration.maxDiscoverBacklog, 1))
        let stream = channel.stream()
        guard lifecycle.runState != .stopped else {
            channel.finish()
            return stream
        }
        let watcherID = UUID()
        let followed = listeners.watchers.add(watcherID, filter: filter, sink: channel)
        perform(follower.follow(followed.map(Self.typePrefix(ofTopic:))))
        for entry in follower.known.values where filter.matches(entry.activity) {
            channel.yield(.appeared(entry.activity))
        }
        channel.onTermination { [weak self] in
            Task(executorPreference: EventLoops.shared) { await self?.removeWatcher(watcherID) }
        }
        return stream
    }

    /// The activities this node knows of right now, matching `filter`.
    public func activities(matching filter: ActivityFilter = .all) -> [DiscoveredActivity] {
        follower.known.values.map(\.activity).filter(filter.matches).sorted { $0.activityType < $1.activityType }
    }

    func removeWatcher(_ id: UUID) {
        perform(follower.unfollow(listeners.watchers.remove(id).map(Self.typePrefix(ofTopic:))))
    }

    /// The type prefix an activity topic (`A:` + prefix) follows.
    static func typePrefix(ofTopic topic: String) -> String {
        String(topic.dropFirst(Topic.activityPrefix.count))
    }

    /// Carries out what the follower made of an advertisement.
    func perform(_ heard: Follower.Heard) {
        switch heard {
        case .appeared(let activity):
            emit(.appeared(activity))
            refreshIfHeld(activity)
        case .updated(let activity):
            emit(.updated(activity))
            refreshIfHeld(activity)
        case .actions(let actions):
            perform(actions)
        }
    }

    /// Carries out what the follower decided.
    func perform(_ actions: [Follower.Action]) {
        for action in actions {
            switch action {
            case .emit(let event): emit(event)
            case .subscribe(let topic): subscribe(topic)
            case .unsubscribe(let topic): unsubscribe(topic)
            case .changed(let activity): refreshIfHeld(activity)
            case .forgotten(let id): continuing.held.release(id)
            case .log(let level, let message): own.logger.log(level: level, "\(message)")
            case .ownPresenceHeard: sockets.lastBusProof = .now
            case .snapshotRound(let reason): observability.metrics.snapshotRound(reason)
            case .ignored(.foreign(let why)):
                observability.securityCounters.foreignIgnored += 1
                logRateLimited("ignoring \(why)")
            case .ignored(.stale(let subject, let sender, let age)):
                observability.securityCounters.staleIgnored += 1
                own.logger.debug("ignoring a stale bus message about \(subject) from node \(sender): sent \(age.isFinite ? "\(Int(age)) s ago" : "with no time") (window \(own.configuration.replayWindow))")
                // Most often two hosts' clocks that disagree: every message of that node is refused
                // then, and its activities come and go (docs/operations.md, "Clocks").
                logRateLimited(Self.staleWarning(sender: sender, age: age, window: own.configuration.replayWindow))
            case .ignored(.replayed): observability.securityCounters.replayedIgnored += 1
            case .ignored(.overQuota): observability.securityCounters.overQuotaIgnored += 1
            case .ignored(.malformed(let why)): noteMalformed(bus: true, why)
            }
        }
    }

    /// Whether every snapshot this node asked for has arrived: it knows what was current when it
    /// started to follow each type prefix.
    public var isSynchronized: Bool { follower.isSynchronized }

    /// Waits until ``isSynchronized``, at most `timeout`; returns whether it is.
    public func untilSynchronized(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !follower.isSynchronized, ContinuousClock.now < deadline, lifecycle.runState != .stopped {
            do { try await EventLoops.sleep(for: .milliseconds(5)) } catch { break }  // the loops' clock
        }
        return follower.isSynchronized
    }

    func emit(_ event: ActivityEvent) {
        // The watchers' tasks run next on this loop thread, once the node's current job (usually
        // `receiveBus`) suspends, rather than waking another thread for every event; `receiveBus`
        // yields every `ReceiveBurst.limit` messages, so that they run under a sustained flow too.
        var overrun: [UUID] = []
        EventLoops.handingOff {
            listeners.watchers.forEachSink(for: event.activity) { id, sink in
                if case .dropped = sink.yield(event) { overrun.append(id) }
            }
        }
        for id in overrun { endOverrun(id) }
    }

    /// A discover stream's reader fell more than ``Configuration-swift.struct/maxDiscoverBacklog``
    /// events behind, and an event did not fit: its stream ends after the events it holds (going on
    /// without the one dropped would leave its reader believing something false), and the node
    /// stops following for it.
    private func endOverrun(_ id: UUID) {
        guard let sink = listeners.watchers.sink(of: id) else { return }
        removeWatcher(id)
        sink.finish()
        observability.metrics.discoverStreamOverrun()
        own.logger.warning("a discover stream's reader fell more than \(own.configuration.maxDiscoverBacklog) events behind (maxDiscoverBacklog): its stream ends after the events it holds; discover again to start over from what this node knows")
    }

    /// Subscribes every bus subscriber to `topic`.
    func subscribe(_ topic: String) {
        for subscriber in subscribers {
            do { try subscriber.subscribe(topic) } catch { own.logger.warning("subscribe \(topic): \(error)") }
        }
    }

    /// Unsubscribes every bus subscriber from `topic`.
    func unsubscribe(_ topic: String) {
        for subscriber in subscribers {
            do { try subscriber.unsubscribe(topic) } catch { own.logger.warning("unsubscribe \(topic): \(error)") }
        }
    }

    /// Reads bus subscriber `index`: in direct mode one peer's messages, which (secure) must name
    /// that peer's key as their sender.
    func receiveBus(_ index: Int) async {
        let subscriber = subscribers[index]
        let connectionKey = subscriberKeys[index]
        var burst = ReceiveBurst()
        // Each message is received into the same `zmq_msg_t`s and read in place (no frame objects,
        // no copy of the envelope), then let go of before the next, so that libzmq reuses its
        // receive buffer.
        let message = ReceivedMessage(capacity: 2)
        while await burst.next() {
            do {
                try await subscriber.receive(into: message)
            } catch {
                return  // cancelled, or the socket closed
            }
            if let descriptor = message.sourceDescriptor { sockets.unfinishedMessages.delivered(on: descriptor) }
            handleBus(message, connectionKey: connectionKey)
            message.release()
        }
    }

    /// One message from a bus subscriber: topic and envelope.
    private func handleBus(_ message: ReceivedMessage, connectionKey: Data?) {
        guard !message.isOverlong, message.count == 2 else {
            noteMalformed(bus: true, "a bus message of \(message.isOverlong ? "more than 2" : "\(message.count)") frames (expected topic and envelope)")
            return
        }
        observability.metrics.received(on: .bus, bytes: message.size(ofFrame: 0) + message.size(ofFrame: 1))
        // Our own advertisements and withdrawals, come back through the broker: dropped before any
        // decoding (the follower would drop them after it), as the follower says.
        let ownEcho = message.withUnsafeBytes(ofFrame: 0) { topic in
            follower.dropsUnread(topic: topic) { message.withUnsafeBytes(ofFrame: 1) { WireOwnEcho.matches($0, nodeID: idUTF8) } }
        }
        if ownEcho { return }
        do {
            // Read once: an untraced advertisement, the commonest message, into plain values (no
            // storage objects); anything else whole.
            let decoded = try message.withUnsafeBytes(ofFrame: 1) { (bytes: UnsafeRawBufferPointer) throws(WireDecodingError) in try WireBusEnvelope.decode(bytes, strings: sockets.busStrings) }
            switch consume decoded {
            case .advertisement(var advertisement):
                // The topic read where libzmq received it (the follower only looks at its prefix).
                perform(message.withUnsafeBytes(ofFrame: 0) { topic in
                    follower.hear(&advertisement, topic: topic, connectionKey: connectionKey, now: .now, date: Date())
                })
            case .other(let envelope) where envelope.traceID.isEmpty:
                perform(message.withUnsafeBytes(ofFrame: 0) { topic in
                    follower.received(envelope, topic: topic, connectionKey: connectionKey, now: .now, date: Date())
                })
            case .other(let envelope):
                receiveTraced(envelope, topic: message.withUnsafeBytes(ofFrame: 0) { [UInt8]($0) }, connectionKey: connectionKey, received: Date())
            }
        } catch {
            noteMalformed(bus: true, "a bus message that is not an envelope: \(error)")
        }
    }

    /// Counts malformed input from the bus or the continuation sockets, and logs it (rate-limited).
    func noteMalformed(bus: Bool, _ what: String) {
        if bus { observability.securityCounters.malformedBus += 1 } else { observability.securityCounters.malformedContinuation += 1 }
        logRateLimited("ignoring malformed input: \(what)")
    }

    /// What a stale message makes a node say (at most once a minute, as ``logRateLimited(_:)``):
    /// who sent it and how far off its time was, and the likely cause.
    static func staleWarning(sender: String, age: TimeInterval, window: Duration) -> String {
        guard age.isFinite else { return "ignoring bus messages of node \(sender) with no send time" }
        let off = age >= 0 ? "\(Int(age)) s old" : "\(Int(-age)) s ahead"
        return "ignoring bus messages of node \(sender) as stale: one was \(off) by its clock against this host's, outside the \(Int(window.seconds)) s replay window; "
            + "if the two hosts' clocks disagree, set them right (NTP): they may differ by the replay window less the refresh interval at most (docs/operations.md, \"Clocks\")"
    }

    /// Logs what a peer made this node ignore at most once a minute, with the counters so far, so
    /// that a peer sending garbage or lies cannot flood the log (every case is counted).
    func logRateLimited(_ message: String) {
        let now = ContinuousClock.now
        if let last = observability.lastRateLimitedLog, now - last < .seconds(60) { return }
        observability.lastRateLimitedLog = now
        let counters = observability.securityCounters
        own.logger.warning("\(message) (so far: \(counters.malformedBus) malformed on the bus, \(counters.malformedContinuation) on the continuation sockets, \(counters.foreignIgnored) foreign, \(counters.replayedIgnored) replayed, \(counters.staleIgnored) stale, \(counters.handshakeRefusals.total) refused handshakes; logged at most once a minute)")
    }

    /// Drops replay-protection entries older than the window (``ReplayGuard/prune(now:)``).
    func pruneSequences(now: ContinuousClock.Instant) {
        follower.pruneSequences(now: now)
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
        /// Connections to this node's publisher cut off for holding more subscriptions than a
        /// broker allows its subscribers by default (``Broker/SubscriptionBounds``): in direct
        /// mode, a peer's; with brokers, a broker's.
        public var subscribersCut = 0
        /// Connections to this node's continuation ROUTER (and, direct, its publisher) cut off for
        /// handing it more than 8 MiB without finishing a message (``UnfinishedMessageBound``).
        public var unfinishedMessagesCut = 0

        public init() {}
    }

    /// Copies ZAP's count of handshakes let in to the counters the metrics report (ZAP counts on
    /// its own thread; the refusals come from the socket monitors and are counted as they come).
    func countAllowedHandshakes() {
        guard let allowed = access.zap?.counters(forDomain: zapDomain).allowed,
              allowed != observability.securityCounters.allowedHandshakes else { return }
        observability.securityCounters.allowedHandshakes = allowed
    }

    /// What this node's security refused or ignored so far.
    public var securityCounters: SecurityCounters {
        var counters = observability.securityCounters
        if let zap = access.zap {
            let handshakes = zap.counters(forDomain: zapDomain)
            counters.allowedHandshakes = handshakes.allowed
        }
        return counters
    }

    /// The nodes on the bus, as their presence says (this one not included), by name.
    public func nodes() -> [PresentNode] {
        follower.directory.nodes
    }
}
