import Foundation
import HandoffWire

/// The originating side of the bus protocol, deciding with no I/O: which activities are current on
/// this node (and why recent ones ended), what the bus hears of them, and when. Events come in (an
/// activity made current, changed or removed; a subscription the publisher heard; ``tick(now:date:)``);
/// bus messages come out, for the node to publish. Time is passed in, so every rule here is tested
/// without a socket or a real clock (AdvertiserTests).
///
/// The schedule: a presence every ``Settings/advertiseInterval`` (it renews every follower's lease
/// of the activities it lists); every current activity advertised again every
/// ``Settings/refreshInterval``; all of them at once when the presence went out later than a lease
/// (this node stalled, and every follower's lease ran out) and when a broker asks (its cache lost
/// some), at most once a second for the broker. Such a pass over every activity, and the answer to
/// a direct peer's snapshot, goes out in slices (``bulkSlice`` every ``bulkPace``), not at once.
struct Advertiser {
    /// What the machine needs to know of its node.
    struct Settings {
        /// The node as the bus names it (the sender of each advertisement).
        var origin: WireNodeRef
        /// Where the node answers continue requests.
        var continueEndpoint: String
        /// How long followers keep an activity without hearing of it.
        var lease: Duration
        /// The team of activities that name none.
        var teamID: String?
        var advertiseInterval: Duration
        var refreshInterval: Duration
        /// Messages per slice of a pass (``Advertiser/bulkSlice``; the simulator draws passes of a
        /// few activities with less).
        var sliceSize = Advertiser.bulkSlice
    }

    /// One message for the bus.
    struct Message {
        var topic: [UInt8]
        var content: Content

        /// An advertisement in plain values (the node writes its envelope without building a
        /// generated message), or any other body.
        enum Content {
            case advertisement(WirePlainAdvertisement)
            case other(WireEnvelope.OneOf_Body)
        }

        init(topic: [UInt8], body: WireEnvelope.OneOf_Body) {
            self.topic = topic
            content = .other(body)
        }

        init(topic: [UInt8], advertisement: WirePlainAdvertisement) {
            self.topic = topic
            content = .advertisement(advertisement)
        }

        /// The body as an envelope holds it (the simulator's envelopes, tests).
        var body: WireEnvelope.OneOf_Body {
            switch content {
            case .advertisement(let advertisement): .advertisement(WireAdvertisement(advertisement))
            case .other(let body): body
            }
        }
    }

    /// What a presence tick decided.
    struct Tick {
        /// Whether a presence went out (the node then does its once-per-presence upkeep).
        var presence = false
        /// Activities whose expiration date passed: taken out and withdrawn here; the node lets
        /// them go (``UserActivity/detach()``).
        var expired: [UserActivity] = []
        /// Why everything was advertised again, when it was.
        var note: String?
        var messages: [Message] = []
    }

    /// How the node is on the bus, for what a subscription means.
    enum Bus {
        /// Through brokers: an empty subscription is a broker's subscribe-all (it connected), and
        /// ``readvertiseTopic`` is its request to advertise again.
        case brokered(readvertiseTopic: [UInt8])
        /// Direct: a peer's snapshot subscription is answered under that topic alone.
        case direct
    }

    /// A pass over many activities, sent in slices: every current one (a refresh, a broker's
    /// ask, a stall), or those a direct peer's snapshot asks for.
    struct Pass {
        enum Purpose: Equatable {
            case everyActivity
            /// The first advertisements of a batch made current at once past its first slice
            /// (``Advertiser/addAll(_:now:)``).
            case newlyCurrent
            /// Answers under `topic`; its `SnapshotReply` goes after the last slice.
            case snapshot(topic: [UInt8], typePrefix: String)
        }

        let purpose: Purpose
        /// The activities current when it began (one made current since was advertised then).
        let ids: [String]
        /// How many of `ids` were looked at.
        var next = 0
        /// How many advertisements went out (what a snapshot's reply counts).
        var advertised = 0
    }

    /// The least time between two re-advertisements a broker asks for.
    static let brokerAskInterval = Duration.seconds(1)
    /// A slice of the passes under way is this many messages, then the next as many ``bulkPace``
    /// later: 100,000 a second. All at once, a node with more activities than its PUB queue holds
    /// (100,000 messages) lost a pass's tail there whenever its broker or followers lagged, and
    /// every later pass the same way, so its followers never learnt of them (`handoff-bench
    /// adverts --count 200000`, docs/performance.md); a snapshot's answer, the same way.
    static let bulkSlice = 1_000
    static let bulkPace = Duration.milliseconds(10)
    /// Snapshot answers under way at most. One more is answered at once with a `SnapshotReply`
    /// that counts the matching activities and no advertisement, so its asker asks again (and after
    /// its last attempt relies on the refresh): a peer that asks without end holds no more memory.
    static let maxSnapshotAnswers = 64
    /// How long the count a busy reply gives for a type prefix is given again before it is taken
    /// anew: a peer that floods requests costs a walk over every activity once per prefix in this
    /// time, not once per request. The asker only tells short from whole by it.
    static let busyCountLifetime = Duration.milliseconds(100)

    let settings: Settings
    private(set) var current = CurrentActivities()
    /// When the next presence is due (the node calls ``tick(now:date:traffic:)`` by ``nextDue``).
    private(set) var nextPresence: ContinuousClock.Instant
    private var nextRefresh: ContinuousClock.Instant
    private var lastPresence: ContinuousClock.Instant
    private var lastReadvertised: ContinuousClock.Instant?
    /// The passes under way: snapshot answers in the order asked (a peer waits on each), then at
    /// most one pass over every activity (a new one replaces it; followers hold leases meanwhile).
    private(set) var passes: [Pass] = []
    /// When the next slice is due, while a pass is under way.
    private(set) var nextSlice: ContinuousClock.Instant?
    /// Snapshot requests answered with a reply alone, ``maxSnapshotAnswers`` being under way.
    private(set) var snapshotsAnsweredBusy = 0
    /// Busy replies' counts by type prefix (``busyCountLifetime``, at most ``maxSnapshotAnswers`` prefixes).
    private var busyCounts = BusyReplyCounts(lifetime: busyCountLifetime, capacity: maxSnapshotAnswers)
    /// The topic of the type advertised last, kept: an app advertises one type or a few, and each
    /// message's topic was an allocation and a copy of the type's bytes.
    var lastTopic: (activityType: String, bytes: [UInt8])?

    /// When the node calls ``tick(now:date:traffic:)`` next: the next presence, or sooner the
    /// next slice of the passes.
    var nextDue: ContinuousClock.Instant { nextSlice.map { min($0, nextPresence) } ?? nextPresence }

    init(_ settings: Settings, now: ContinuousClock.Instant) {
        self.settings = settings
        nextPresence = now + settings.advertiseInterval
        nextRefresh = now + settings.refreshInterval
        lastPresence = now
    }

    // MARK: Events

    /// Makes `activity` current (again) and advertises it: one message, always.
    mutating func add(_ activity: UserActivity) -> Message {
        current.add(activity)
        return publication(of: activity)
    }

    /// Makes many activities current at once (``Node/becomeCurrent(_:)``): every one is current
    /// now, the first slice of their advertisements goes out at once and the rest as a pass, a
    /// slice every ``bulkPace`` (ahead of a pass over every activity). Published in the call, a
    /// batch of 100,000 held the node's loop for 0.38 s (release; a debug build holds it 100 times
    /// longer), against 53-85 ms now, what checking and claiming them takes (`handoff-bench
    /// become-current --count 100000`), and it overran the publisher's queue as a pass did. Until
    /// its slice goes, an activity is left out of presences: a follower would take it for one it
    /// missed, and ask.
    mutating func addAll(_ activities: [UserActivity], now: ContinuousClock.Instant) -> [Message] {
        for activity in activities { current.add(activity) }
        let first = activities.prefix(settings.sliceSize)
        var messages: [Message] = []
        for activity in first { messages.append(publication(of: activity)) }
        let rest = activities.dropFirst(first.count)
        guard !rest.isEmpty else { return messages }
        enqueue(Pass(purpose: .newlyCurrent, ids: rest.map(\.id)))
        // Its first slice went with the call: the rest waits for the pace.
        if nextSlice == nil { nextSlice = now + Self.bulkPace }
        return messages
    }

    /// The activities of batches whose first advertisement has not gone yet (``addAll(_:now:)``).
    var awaitingFirstAdvertisement: Set<String> {
        var ids = Set<String>()
        for pass in passes where pass.purpose == .newlyCurrent { ids.formUnion(pass.ids[pass.next...]) }
        return ids
    }

    /// Takes `activity` out; withdraws it when it was current.
    mutating func remove(_ activity: UserActivity, reason: RemovalReason) -> [Message] {
        guard current.remove(activity.id, reason: reason) else { return [] }
        return [withdrawal(of: activity, reason: reason)]
    }

    /// A continue-once activity was continued: taken out (withdrawn as invalidated), and a late
    /// continue request for it is told it already was.
    mutating func continuedOnce(_ activity: UserActivity) -> [Message] {
        let messages = remove(activity, reason: .invalidated)
        current.markEnded(activity.id, .alreadyContinued)
        return messages
    }

    /// Current activities whose properties changed: each advertised again (or withdrawn, while it
    /// is not eligible for Handoff, or its text is past the contract's limit). Ids no longer
    /// current are skipped.
    mutating func changed(_ ids: some Sequence<String>) -> [Message] {
        var messages: [Message] = []
        for activity in ids.compactMap({ current[$0] }) { messages.append(publication(of: activity)) }
        return messages
    }

    /// The node shuts down: every activity taken out and withdrawn. Returns them with the messages.
    mutating func removeAll() -> (activities: [UserActivity], messages: [Message]) {
        let activities = current.removeAll()
        var messages: [Message] = []
        for activity in activities { messages.append(withdrawal(of: activity, reason: .nodeShutdown)) }
        return (activities, messages)
    }

    /// What the publisher heard (the subscription's topic, after its subscribe byte).
    mutating func subscribed(to topic: ArraySlice<UInt8>, bus: Bus, now: ContinuousClock.Instant) -> (note: String?, messages: [Message]) {
        switch bus {
        case .brokered(let readvertiseTopic):
            // A broker's subscribe-all (a caching broker forwards nothing else), one passed on from
            // above its site (`R:*`), or its request that this node advertise again what its
            // cache lost.
            if topic.isEmpty || topic.starts(with: Topic.readvertiseAllPrefixBytes) { return readvertise(now: now, askedByBroker: false) }
            if topic.elementsEqual(readvertiseTopic) { return readvertise(now: now, askedByBroker: true) }
            return (nil, [])
        case .direct:
            guard let typePrefix = Topic.snapshotTypePrefix(topic) else { return (nil, []) }
            return (nil, answerSnapshot(topic: Array(topic), typePrefix: typePrefix, now: now))
        }
    }

    /// Every current activity advertised again: a broker connected or asked (at most once per
    /// ``brokerAskInterval`` when it asked), or this node stalled past its lease.
    mutating func readvertise(now: ContinuousClock.Instant, askedByBroker: Bool) -> (note: String?, messages: [Message]) {
        var note: String?
        if askedByBroker {
            if let last = lastReadvertised, now - last < Self.brokerAskInterval { return (nil, []) }
            note = "a broker lost some of this node's activities; advertising all \(current.count) again"
        }
        lastReadvertised = now
        return (note, startPass(now: now))
    }

    /// Begins a pass over every current activity (in place of one under way).
    private mutating func startPass(now: ContinuousClock.Instant) -> [Message] {
        passes.removeAll { $0.purpose == .everyActivity }
        return begin(Pass(purpose: .everyActivity, ids: current.activities.map(\.id)), now: now)
    }

    /// Begins answering a direct peer's snapshot of `typePrefix` under `topic`.
    private mutating func answerSnapshot(topic: [UInt8], typePrefix: String, now: ContinuousClock.Instant) -> [Message] {
        guard passes.count(where: { $0.purpose != .everyActivity }) < Self.maxSnapshotAnswers else {
            snapshotsAnsweredBusy += 1
            return [snapshotReply(topic: topic, typePrefix: typePrefix, count: busyCount(of: typePrefix, now: now))]
        }
        let matching = current.activities.filter { Self.answers(typePrefix, with: $0) }
        return begin(Pass(purpose: .snapshot(topic: topic, typePrefix: typePrefix), ids: matching.map(\.id)), now: now)
    }

    /// Whether a snapshot of `typePrefix` holds `activity`: its type starts so, and it is advertised.
    private static func answers(_ typePrefix: String, with activity: UserActivity) -> Bool {
        activity.activityType.hasPrefix(typePrefix) && activity.isAdvertisable
    }

    /// How many current activities a busy reply for `typePrefix` counts: taken at most once per
    /// ``busyCountLifetime``.
    private mutating func busyCount(of typePrefix: String, now: ContinuousClock.Instant) -> Int {
        let current = current
        return busyCounts.count(of: typePrefix, now: now, everything: current.count) {
            current.activities.count { Self.answers(typePrefix, with: $0) }
        }
    }

    /// Queues `pass` (a snapshot answer before the pass over every activity). Returns the first
    /// slice when none is due, else nothing (it goes with the slice that is due).
    private mutating func begin(_ pass: Pass, now: ContinuousClock.Instant) -> [Message] {
        let idle = nextSlice == nil
        enqueue(pass)
        return idle ? slice(now: now) : []
    }

    /// Puts `pass` in its place among the passes: a pass over every activity last, any other
    /// (a snapshot answer, a batch's rest) ahead of it, after those of its kind already queued.
    private mutating func enqueue(_ pass: Pass) {
        if pass.purpose == .everyActivity {
            passes.append(pass)
        } else {
            passes.insert(pass, at: passes.firstIndex { $0.purpose == .everyActivity } ?? passes.endIndex)
        }
    }

    /// Up to ``Settings/sliceSize`` messages of the passes, in order: their activities still current, as
    /// they are now; a snapshot answer's reply after its last advertisement.
    private mutating func slice(now: ContinuousClock.Instant) -> [Message] {
        var messages: [Message] = []
        while let pass = passes.first, messages.count < settings.sliceSize {
            var next = pass.next, advertised = pass.advertised
            while next < pass.ids.count, messages.count < settings.sliceSize {
                defer { next += 1 }
                guard let activity = current[pass.ids[next]] else { continue }
                switch pass.purpose {
                case .everyActivity, .newlyCurrent:
                    messages.append(publication(of: activity))
                case .snapshot(let topic, _):
                    guard let advertisement = advertisement(of: activity) else { continue }
                    messages.append(Message(topic: topic, advertisement: advertisement))
                    advertised += 1
                }
            }
            guard next == pass.ids.count else {
                passes[0].next = next
                passes[0].advertised = advertised
                break
            }
            if case .snapshot(let topic, let typePrefix) = pass.purpose {
                messages.append(snapshotReply(topic: topic, typePrefix: typePrefix, count: advertised))
            }
            passes.removeFirst()
        }
        nextSlice = passes.isEmpty ? nil : now + Self.bulkPace
        return messages
    }

    /// The passes' next slice when it is due (at ``nextSlice``), else nothing.
    mutating func dueSlice(now: ContinuousClock.Instant) -> [Message] {
        guard let due = nextSlice, now >= due else { return [] }
        return slice(now: now)
    }

    /// The next slice of a pass when it is due; presence, refresh and expiry when the presence is
    /// due (nothing else before ``nextPresence``).
    ///
    /// - Parameter traffic: What the node's sockets carried so far, for its presence.
    mutating func tick(now: ContinuousClock.Instant, date: Date, traffic: WireNodeTraffic = WireNodeTraffic()) -> Tick {
        var tick = Tick()
        tick.messages = dueSlice(now: now)
        guard now >= nextPresence else { return tick }
        tick.presence = true
        nextPresence = now + settings.advertiseInterval
        for activity in current.activities {
            if let expiration = activity.expirationDate, expiration <= date { tick.expired.append(activity) }
        }
        for activity in tick.expired { tick.messages += remove(activity, reason: .expired) }
        if now >= nextRefresh {
            nextRefresh = now + settings.refreshInterval
            tick.messages += startPass(now: now)
        } else if now - lastPresence > settings.lease {
            // The presence is later than a lease (this node stalled: a flood of work, a pause):
            // every follower's lease of its activities ran out. They hear them all again.
            tick.note = "this node's presence is \((now - lastPresence).seconds) s late, more than its lease; advertising every current activity again"
            tick.messages += readvertise(now: now, askedByBroker: false).messages
        }
        lastPresence = now
        tick.messages.append(presence(traffic: traffic))
        return tick
    }
}
