import Foundation
import HandoffWire
import Logging
import ZeroMQ

/// The following side of the bus protocol, deciding with no I/O: which activities of other nodes
/// this node knows, and what it believes of what it hears. Events come in (a decoded bus message,
/// a type prefix followed or left, a bus connection back, ``tick(now:date:)``); actions come out
/// (``Action``: an event for the discover streams, a subscription to make or drop, an activity the
/// continuation client holds, something ignored for the node to count and log). Time is passed in,
/// so each rule is tested without a socket or a real clock (FollowerTests).
///
/// The rules: news of an activity is believed only from its origin, with its key when secure, and
/// fresh (``BusBelief``); an activity is known for its lease, renewed by its origin's presence,
/// and forgotten when the presence stops listing it (``KnownActivities``); what is followed starts
/// with a snapshot, asked again when it arrived short and when the bus lost something
/// (``FollowedSnapshots``, ``Resynchronization``); quotas bound what one origin and all of them can make this
/// node hold.
struct Follower {
    /// What a follower subscribes to for its whole life, whatever it follows: presences keep
    /// known activities alive (wire.proto, NodePresence).
    static let standingSubscriptions = [Topic.presencePrefix]

    /// Where replay protection keeps a node's presence (activity ids are never empty).
    static let presenceSubject = HashedID("")
    /// Snapshots asked at once (under way, or waiting to be asked again): half of what a broker
    /// or a direct peer answers at once (``SnapshotAnswers``), so that a node following thousands
    /// of prefixes is answered in full rather than busy, and leaves room for a joiner beside it.
    static let maxSnapshotsUnderWay = 32

    let settings: Settings
    private(set) var known: KnownActivities
    private(set) var directory = NodeDirectory(capacity: 10_000)
    private(set) var snapshots: FollowedSnapshots
    private(set) var resynchronization: Resynchronization
    private var belief: BusBelief
    /// What replay protection remembers now (one entry per sender and subject within the window).
    var replayEntries: Int { belief.replayGuard.count }
    /// The type prefixes some discover stream (or the configuration) follows.
    private(set) var followed: Set<String> = []
    /// Origins whose over-quota activities were logged (once each), bounded.
    private var loggedOverQuota: Set<String> = []
    /// Makes a snapshot request's random token (passed in, for a seeded simulation).
    var makeToken: () -> String { get { snapshots.makeToken } set { snapshots.makeToken = newValue } }
    /// Draws a snapshot backoff's jitter, in 0..<1 (passed in likewise).
    var drawJitter: () -> Double { get { snapshots.drawJitter } set { snapshots.drawJitter = newValue } }

    init(_ settings: Settings) {
        self.settings = settings
        known = KnownActivities(
            maxPerOrigin: settings.maxKnownPerNode, maxTotal: settings.maxKnown, maxPerKey: settings.maxKnownPerKey, maxBytes: settings.maxKnownBytes)
        snapshots = FollowedSnapshots(answerers: settings.snapshotAnswerers, atOnce: settings.snapshotsAtOnce)
        resynchronization = Resynchronization(capacity: settings.maxKnown)
        belief = BusBelief(secure: settings.secure, replayGuard: ReplayGuard(
            window: settings.replayWindow, maxPerSender: settings.maxReplaySubjectsPerSender, maxEntries: settings.maxReplaySubjects))
    }

    /// Whether every snapshot asked for has arrived.
    var isSynchronized: Bool { snapshots.isSettled }

    // MARK: Following

    /// Type prefixes newly followed: subscribed to, each with its snapshot asked for.
    mutating func follow(_ typePrefixes: [String]) -> [Action] {
        guard !typePrefixes.isEmpty else { return [] }
        resynchronization.followingChanged()
        var actions: [Action] = []
        for typePrefix in typePrefixes {
            followed.insert(typePrefix)
            actions.append(.subscribe(Topic.activityPrefix + typePrefix))
            actions += snapshots.ask(typePrefix)
        }
        return actions
    }

    /// Type prefixes no longer followed: unsubscribed, their snapshots ended.
    mutating func unfollow(_ typePrefixes: [String]) -> [Action] {
        var actions: [Action] = []
        for typePrefix in typePrefixes {
            followed.remove(typePrefix)
            actions.append(.unsubscribe(Topic.activityPrefix + typePrefix))
            actions += snapshots.cancel(typePrefix)
        }
        return actions + snapshots.askWaitingTurns()
    }

    // MARK: What the bus says

    /// A bus message, decoded: `topic` is its first frame; `connectionKey` the key of the direct
    /// peer it came from, when secure in direct mode (its messages must name that key as sender).
    mutating func received(_ envelope: WireEnvelope, topic: some Collection<UInt8>, connectionKey: Data?, now: ContinuousClock.Instant, date: Date) -> [Action] {
        let sender = envelope.sender
        if let refusal = Self.foreignToConnection(sender.publicKey, connectionKey) { return [refusal] }
        guard topic.starts(with: Topic.snapshotPrefixBytes) else { return heard(envelope, from: Speaker(envelope, sender: sender), now: now, date: date) }
        let snapshotTopic = String(decoding: topic, as: UTF8.self)
        switch envelope.body {
        case .advertisement:
            guard snapshots.advertisementArrived(on: snapshotTopic, now: now) else { return [] }
            // A broker answers with the envelope its cache kept: perhaps the very one this node
            // heard live and then let go (its lease ran out while the bus was away). Only the
            // broker publishes on snapshot topics, and directly only the origin answers.
            return heard(envelope, from: Speaker(envelope, sender: sender), now: now, date: date, fromSnapshot: true)
        case .snapshotReply(let reply):
            return snapshots.replyArrived(on: snapshotTopic, count: Int(reply.count), now: now, followed: followed)
        default:
            return [.log(.debug, "ignoring a \(String(describing: envelope.body)) on snapshot topic \(snapshotTopic)")]
        }
    }

    /// An advertisement's envelope read into plain values (the bus's commonest message): what
    /// ``received(_:topic:connectionKey:now:date:)`` does with an envelope holding it.
    mutating func received(
        _ envelope: WireAdvertisementEnvelope, topic: some Collection<UInt8>, connectionKey: Data?, now: ContinuousClock.Instant, date: Date
    ) -> [Action] {
        var envelope = envelope
        return hear(&envelope, topic: topic, connectionKey: connectionKey, now: now, date: date).actions
    }

    /// The same, as ``Heard``: what the node calls for every advertisement. The activity takes its
    /// strings out of `envelope` (``DiscoveredActivity/init(taking:)``).
    mutating func hear(
        _ envelope: inout WireAdvertisementEnvelope, topic: some Collection<UInt8>, connectionKey: Data?, now: ContinuousClock.Instant, date: Date
    ) -> Heard {
        let speaker = Speaker.of(envelope.sender, sequence: envelope.sequence, sentAt: envelope.sentAt?.date)
        if let refusal = Self.foreignToConnection(speaker.senderKey, connectionKey) { return .actions([refusal]) }
        var fromSnapshot = false
        if topic.starts(with: Topic.snapshotPrefixBytes) {
            guard snapshots.advertisementArrived(on: String(decoding: topic, as: UTF8.self), now: now) else { return .actions([]) }
            fromSnapshot = true  // (as in the envelope's case)
        }
        return heard(&envelope.advertisement, from: speaker, now: now, date: date, fromSnapshot: fromSnapshot)
    }

    /// Who sent a bus message and when: what replay protection and the sender rule judge.
    /// Of the sender, only its id and key: the whole node (five reference-counted fields) was
    /// copied for every message heard.
    private struct Speaker {
        var senderID: String
        var senderKey: Data
        var sequence: UInt64
        var sentAt: Date?

        init(senderID: String, senderKey: Data, sequence: UInt64, sentAt: Date?) {
            self.senderID = senderID
            self.senderKey = senderKey
            self.sequence = sequence
            self.sentAt = sentAt
        }

        /// (A function, not an initializer: an initializer takes its arguments owned, and
        /// `sender` would be copied whole to be passed.)
        static func of(_ sender: WireNodeRef?, sequence: UInt64, sentAt: Date?) -> Speaker {
            Speaker(senderID: sender?.nodeID ?? "", senderKey: sender?.publicKey ?? Data(), sequence: sequence, sentAt: sentAt)
        }

        init(_ envelope: WireEnvelope, sender: WireNodeRef) {
            self.init(senderID: sender.nodeID, senderKey: sender.publicKey, sequence: envelope.sequence,
                      sentAt: envelope.hasSentAt ? envelope.sentAt.date : nil)
        }
    }

    /// A message from a direct peer (secure, direct mode) must name that peer's key as its sender.
    private static func foreignToConnection(_ senderKey: Data, _ connectionKey: Data?) -> Action? {
        guard let connectionKey, senderKey != connectionKey else { return nil }
        return .ignored(.foreign("a bus message from a direct peer that names another key as its sender"))
    }

    private mutating func heard(_ envelope: WireEnvelope, from speaker: Speaker, now: ContinuousClock.Instant, date: Date, fromSnapshot: Bool = false) -> [Action] {
        let own = settings.nodeID
        switch envelope.body {
        case .advertisement(let advertisement):
            var plain = WirePlainAdvertisement(advertisement)
            return heard(&plain, from: speaker, now: now, date: date, fromSnapshot: fromSnapshot).actions
        case .withdrawal(let withdrawal):
            let origin = withdrawal.origin
            guard settings.includeOwnActivities || origin.nodeID != own else { return [] }
            guard WireLimits.fitsBus(activityID: withdrawal.activityID.utf8, nodeID: origin.nodeID.utf8) else {
                return [.ignored(.malformed("a withdrawal naming an activity or node id past the contract's lengths"))]
            }
            // The id hashed once, for the replay guard's table and the known one.
            let id = HashedID(withdrawal.activityID)
            if let refusal = believe(speaker, originKey: origin.publicKey, originID: HashedID(origin.nodeID), subject: id, date: date, now: now) {
                return [refusal]
            }
            return forget(id, reason: RemovalReason(wire: withdrawal.reason))
        case .nodePresence(let presence):
            let node = presence.node
            var actions: [Action] = node.nodeID == own ? [.ownPresenceHeard] : []
            guard settings.includeOwnActivities || node.nodeID != own else { return actions }
            guard WireLimits.fits(presence) else {
                return actions + [.ignored(.malformed("a presence whose node id, name, host, continue endpoint or an activity id it lists is past the contract's lengths"))]
            }
            // Replay protection as for an activity, under a name no activity id can have.
            if let refusal = believe(speaker, originKey: node.publicKey, originID: HashedID(node.nodeID), subject: Self.presenceSubject, date: date, now: now) {
                return actions + [refusal]
            }
            let lease = presence.leaseMs > 0 ? Duration.milliseconds(WireLimits.granted(leaseMs: presence.leaseMs)) : settings.defaultLease
            let silence = directory.heard(presence, lease: lease, now: now, wallClock: date)
            let listed = Set(presence.activityIds)
            for id in known.renew(origin: node.nodeID, listed: listed, partial: presence.partial, deadline: now + lease) {
                actions += forget(id, reason: .lost)
            }
            // More than half a lease since the last one (a lease is three presences by default):
            // one or more went past this node, and so may what its origin changed meanwhile.
            let late = silence.map { $0 > lease / 2 } ?? false
            let sender = node.publicKey.isEmpty ? "node " + node.nodeID : "key " + node.publicKey.base64EncodedString()
            return actions + resynchronize(afterPresenceOf: node.nodeID, sender: sender, listing: listed, late: late, now: now)
        default:
            return []
        }
    }

    /// An advertisement (either form, as plain values): believed, then kept (``KnownActivities``);
    /// the activity takes its strings out of `advertisement`.
    private mutating func heard(
        _ advertisement: inout WirePlainAdvertisement, from speaker: Speaker, now: ContinuousClock.Instant, date: Date, fromSnapshot: Bool
    ) -> Heard {
        // Our own, come back through the broker: nothing to do (and nothing to remember).
        let originNodeID = advertisement.origin?.nodeID ?? ""
        guard settings.includeOwnActivities || originNodeID != settings.nodeID else { return .actions([]) }
        guard WireLimits.fitsBus(activityID: advertisement.activityID.utf8, activityType: advertisement.activityType.utf8, nodeID: originNodeID.utf8) else {
            return .actions([.ignored(.malformed("an advertisement naming an activity id, type or node id past the contract's lengths"))])
        }
        // The id and the origin hashed once, for the replay guard's table and the known one.
        let id = HashedID(advertisement.activityID), originID = HashedID(originNodeID)
        if let refusal = believe(speaker, originKey: advertisement.origin?.publicKey ?? Data(), originID: originID, subject: id, date: date, now: now,
                                 allowingRepeat: fromSnapshot) { return .actions([refusal]) }
        let activity = DiscoveredActivity(taking: &advertisement)
        if let expiration = activity.expirationDate, expiration <= date { return .actions(forget(id, reason: .expired)) }
        switch known.arrive(activity, id: id, origin: originID, deadline: now + activity.lease, now: now) {
        case .appeared: return .appeared(activity)
        case .updated: return .updated(activity)
        case .renewed, .stale: return .actions([])
        case .overQuota(let ofOrigin, let total):
            return ignoredOverQuota(activity) { "beyond the quota: \(ofOrigin) known of it, \(total) in all (maxKnownActivitiesPerNode \($0.maxKnownPerNode), maxKnownActivities \($0.maxKnown))" }
        case .overBytes(let bytes):
            return ignoredOverQuota(activity) { "that would take the activities known here past \($0.maxKnownBytes >> 20) MiB (maxKnownActivityBytes; they take \(bytes >> 20) MiB)" }
        }
    }

    /// An activity (or a newer version) not kept, over a quota: counted, and logged once per
    /// origin, saying `why` (made only then, from the settings).
    private mutating func ignoredOverQuota(_ activity: DiscoveredActivity, why: (Settings) -> String) -> Heard {
        var actions: [Action] = [.ignored(.overQuota)]
        let origin = activity.origin.id
        if loggedOverQuota.count < 10_000, loggedOverQuota.insert(origin).inserted {
            actions.append(.log(.warning, "ignoring activities of node \(activity.origin.name) (\(origin)) \(why(settings))"))
        }
        return .actions(actions)
    }

    /// `nil` when the message is believed (``BusBelief``); otherwise what to count.
    private mutating func believe(
        _ speaker: Speaker, originKey: Data, originID: HashedID, subject: HashedID, date: Date, now: ContinuousClock.Instant,
        allowingRepeat: Bool = false
    ) -> Action? {
        let knownKey = belief.secure ? known[subject].map { $0.activity.origin.publicKey?.bytes ?? [] } : nil
        let verdict = belief.judge(
            senderNodeID: speaker.senderID, senderKey: speaker.senderKey, originNodeID: originID, originKey: originKey,
            subject: subject, sequence: speaker.sequence, sentAt: speaker.sentAt,
            knownKey: knownKey, now: date, clock: now, allowingRepeat: allowingRepeat)
        switch verdict {
        case .believed: return nil
        case .foreign(let why): return .ignored(.foreign(why))
        case .stale(let age): return .ignored(.stale(subject: subject.id, sender: speaker.senderID, age: age))
        case .replayed: return .ignored(.replayed)
        case .full: return .ignored(.overQuota)
        }
    }

    private mutating func forget(_ id: String, reason: RemovalReason) -> [Action] {
        forget(HashedID(id), reason: reason)
    }

    private mutating func forget(_ id: HashedID, reason: RemovalReason) -> [Action] {
        guard let activity = known.remove(id) else { return [] }
        return [.forgotten(id.id), .emit(.removed(activity, reason))]
    }

    // MARK: Recovery

    /// A presence renewed what it lists; those of its ids not held here may be lost activities of
    /// a type this node follows. A `late` one (its origin silent here for over half a lease: a
    /// partition that healed with no reconnection seen, an origin stopped and gone on) may follow
    /// changes this node never heard, to activities it still holds.
    private mutating func resynchronize(afterPresenceOf origin: String, sender: String, listing listed: Set<String>, late: Bool, now: ContinuousClock.Instant) -> [Action] {
        guard !followed.isEmpty else { return [] }
        let unheld = listed.filter { known[$0] == nil }
        if resynchronization.presence(origin: origin, sender: sender, listed: listed, unheld: unheld, now: now) {
            return [.log(.debug, "a presence of \(origin) names \(unheld.count) activities not known here; asking for the snapshots again")]
                + snapshots.askAgain(.unheldIDs, followed: followed)
        }
        guard late, resynchronization.silenceEnded(now: now) else { return [] }
        return [.log(.debug, "\(origin) was silent here for over half its lease; asking for the snapshots again")] + snapshots.askAgain(.silenceEnded, followed: followed)
    }

    /// A bus subscriber connected again (a broker restarted, the network came back): what was
    /// advertised meanwhile went past this node.
    mutating func busReconnected(to endpoint: String, now: ContinuousClock.Instant) -> [Action] {
        guard !followed.isEmpty, resynchronization.reconnected(now: now) else { return [] }
        return [.log(.info, "connected to \(endpoint) again; asking for the snapshots of what this node follows")]
            + snapshots.askAgain(.reconnected, followed: followed)
    }

    // MARK: Time

    /// Leases that ran out, snapshots some answerers never replied to, a resynchronization round
    /// put off by its interval, and one whose snapshots all arrived.
    mutating func tick(now: ContinuousClock.Instant, date: Date) -> [Action] {
        var actions: [Action] = []
        // A node whose presence lapsed left: what was remembered of its ids goes with it.
        for origin in directory.expire(now: now) { resynchronization.forget(origin: origin) }
        for (id, reason) in known.due(now: now, wallClock: date) {
            if reason == .lost, let origin = known[id]?.activity.origin.id {
                resynchronization.lapsed(id, origin: origin, now: now)
            }
            actions += forget(id, reason: reason)
        }
        // (Whether a round is due depends on no snapshot's state: it is read before their timers run.)
        actions += snapshots.tick(now: now, followed: followed, round: resynchronization.due(now: now))
        if resynchronization.inRound, isSynchronized {
            let known = self.known
            resynchronization.settled(now: now) { known[$0] != nil }
        }
        return actions
    }

    /// Drops replay-protection entries older than the window (once per presence).
    mutating func pruneSequences(now: ContinuousClock.Instant) {
        belief.replayGuard.prune(now: now)
    }
}
