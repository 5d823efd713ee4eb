import HandoffWire

/// What an operator's view of the bus shows (the live page, `handoff top`), built from the bus
/// messages one subscriber hears, deciding with no I/O: messages and time come in, a
/// ``BusViewSnapshot`` comes out. The observer (``BusObserver``) only receives and passes them on.
///
/// Every table is bounded: a bus of hostile or very many members cannot grow it past
/// ``Limits``; what does not fit is counted (``BusViewSnapshot/overflow``), never kept.
public struct BusView: Sendable {
    /// How much the view keeps at most.
    public struct Limits: Sendable {
        public var nodes = 10_000
        public var activities = 200_000
        public var streams = 1_000
        public init() {}
    }

    struct NodeRecord {
        var name: String
        var host: String
        var activityCount: Int
        var partial: Bool
        var lease: Duration
        var lastHeard: ContinuousClock.Instant
        /// Messages and bytes this view heard from the node (its publications on the bus).
        var published = Count()
        /// What its presence said it carried, latest and the one before (for rates).
        var traffic: (WireNodeTraffic, ContinuousClock.Instant)?
        var previousTraffic: (WireNodeTraffic, ContinuousClock.Instant)?
    }

    struct ActivityRecord {
        var type: String
        var origin: String
        var expires: ContinuousClock.Instant
    }

    struct StreamRecord {
        var node: String
        var peer: String
        var activityType: String
        var streamID: UInt64
        var sent: UInt64
        var received: UInt64
        var expected: UInt64
        var state: BusViewSnapshot.Stream.State
        var detail: String
        var opened: ContinuousClock.Instant
        var updated: ContinuousClock.Instant
    }

    struct Count {
        var messages = 0
        var bytes = 0
        mutating func add(bytes: Int) {
            messages += 1
            self.bytes += bytes
        }
    }

    /// How long a finished or failed stream stays in view, and a silent one before it is dropped.
    static let finishedStreamShown = Duration.seconds(10)
    static let silentStreamDropped = Duration.seconds(30)
    /// How long a node that went silent past its lease stays in view, marked gone.
    static let goneNodeShown = Duration.seconds(60)
    /// The chart's span: one bucket a second.
    static let history = 60

    let limits: Limits
    let started: ContinuousClock.Instant
    /// The token of this view's own snapshot request: only its answer is taken as news.
    let snapshotToken: String?
    private(set) var nodes: [String: NodeRecord] = [:]
    private(set) var activities: [String: ActivityRecord] = [:]
    /// The ids of each origin's activities in view: a presence renews its own, not a walk of all.
    private var activityIDsByOrigin: [String: Set<String>] = [:]
    private(set) var streams: [String: StreamRecord] = [:]
    private var perSecond: [Count]
    private var currentSecond: Int = 0
    private(set) var total = Count()
    private(set) var malformed = 0
    private(set) var continuations = 0
    private(set) var overflow = 0

    public init(limits: Limits = Limits(), snapshotToken: String? = nil, now: ContinuousClock.Instant) {
        self.limits = limits
        self.snapshotToken = snapshotToken
        started = now
        perSecond = Array(repeating: Count(), count: Self.history)
    }

    // MARK: Events

    /// One bus message (its frames' bytes), heard at `now`.
    public mutating func observe(topic: [UInt8], envelope: [UInt8], now: ContinuousClock.Instant) {
        let bytes = topic.count + envelope.count
        count(bytes: bytes, now: now)
        // Advertisements and withdrawals, most of a busy bus, are read in place as a broker reads
        // them (WireBusSummary: a fraction of a full decode); their type is the topic's.
        if topic.starts(with: Self.activityTopicPrefix), observeInPlace(topic: topic, envelope: envelope, bytes: bytes, now: now) { return }
        guard let decoded = try? WireEnvelope.decode(envelope) else {
            malformed += 1
            return
        }
        let onSnapshotTopic = topic.starts(with: Topic.snapshotPrefixBytes)
        if onSnapshotTopic {
            // Somebody's snapshot: news only when it answers this view's own request.
            guard let token = snapshotToken, topic.dropFirst(Topic.snapshotPrefixBytes.count).starts(with: Array(token.utf8)) else { return }
        } else if !decoded.sender.nodeID.isEmpty, !decoded.sender.nodeID.hasPrefix("broker@") {
            // (A broker's own envelopes, snapshot replies, are not a node's traffic.)
            publishedBy(decoded.sender.nodeID, bytes: bytes, now: now)
        }
        switch decoded.body {
        case .advertisement(let advertisement):
            advertised(advertisement.activityID, type: advertisement.activityType, origin: advertisement.origin.nodeID, leaseMs: advertisement.leaseMs, now: now)
        case .withdrawal(let withdrawal): forget(withdrawal.activityID)
        case .nodePresence(let presence): heard(presence, now: now)
        case .nodeEvent(let event): happened(event, sender: decoded.sender, now: now)
        default: break
        }
    }

    /// A message that was not a topic and an envelope.
    public mutating func observeMalformed(bytes: Int, now: ContinuousClock.Instant) {
        count(bytes: bytes, now: now)
        malformed += 1
    }

    /// Forgets what has lapsed: nodes past their lease (after showing them gone a while), their
    /// activities, activities past their lease, streams finished or silent.
    public mutating func expire(now: ContinuousClock.Instant) {
        advanceSeconds(to: now)
        nodes = nodes.filter { now - $0.value.lastHeard < $0.value.lease + Self.goneNodeShown }
        let lapsed = activities.filter { $0.value.expires <= now }.keys
        for activityID in lapsed { forget(activityID) }
        streams = streams.filter { _, stream in
            switch stream.state {
            case .open: now - stream.updated < Self.silentStreamDropped
            case .finished, .failed: now - stream.updated < Self.finishedStreamShown
            }
        }
    }

    static let activityTopicPrefix = Array(Topic.activityPrefix.utf8)

    /// An advertisement or withdrawal read in place; false when the envelope is something else
    /// (or malformed), for the full decode to take.
    private mutating func observeInPlace(topic: [UInt8], envelope: [UInt8], bytes: Int, now: ContinuousClock.Instant) -> Bool {
        guard let summary = envelope.withUnsafeBytes({ try? WireBusSummary.read($0) }) else { return false }
        switch summary.body {
        case .advertisement(let activityID, let origin, _, let leaseMs, _):
            publishedBy(summary.sender.id, bytes: bytes, now: now)
            let type = String(decoding: topic.dropFirst(Self.activityTopicPrefix.count), as: UTF8.self)
            advertised(activityID, type: type, origin: origin.id, leaseMs: leaseMs, now: now)
            return true
        case .withdrawal(let activityID, _):
            publishedBy(summary.sender.id, bytes: bytes, now: now)
            forget(activityID)
            return true
        case .presence, .other:
            return false
        }
    }

    // MARK: What the messages say

    private mutating func publishedBy(_ senderID: String, bytes: Int, now: ContinuousClock.Instant) {
        guard !senderID.isEmpty else { return }
        // (A node that does not fit is counted once, by what its message says.) Its name and host
        // come with its presence.
        guard var node = nodes[senderID] ?? newNode(now: now, countingOverflow: false) else { return }
        node.published.add(bytes: bytes)
        nodes[senderID] = node
    }

    private mutating func newNode(now: ContinuousClock.Instant, countingOverflow: Bool = true) -> NodeRecord? {
        guard nodes.count < limits.nodes else {
            if countingOverflow { overflow += 1 }
            return nil
        }
        return NodeRecord(name: "", host: "", activityCount: 0, partial: false, lease: .seconds(6), lastHeard: now)
    }

    private mutating func heard(_ presence: WireNodePresence, now: ContinuousClock.Instant) {
        // Past the contract's lengths: every node's record would hold up to a frame of name.
        guard WireLimits.fits(presence) else {
            malformed += 1
            return
        }
        let id = presence.node.nodeID
        guard var node = nodes[id] ?? newNode(now: now) else { return }
        node.name = presence.node.name
        node.host = presence.node.host
        node.activityCount = presence.activityIds.count
        node.partial = presence.partial
        node.lease = presence.leaseMs > 0 ? .milliseconds(WireLimits.granted(leaseMs: presence.leaseMs)) : .seconds(6)
        node.lastHeard = now
        if presence.hasTraffic {
            // A counter that went down is a restarted node: its rate starts again.
            if let last = node.traffic, last.0.messagesOut <= presence.traffic.messagesOut { node.previousTraffic = last } else { node.previousTraffic = nil }
            node.traffic = (presence.traffic, now)
        }
        nodes[id] = node
        // The presence renews what it lists; unless partial, what it leaves out was withdrawn.
        let listed = Set(presence.activityIds)
        for activityID in activityIDsByOrigin[id] ?? [] {
            if listed.contains(activityID) {
                activities[activityID]?.expires = now + node.lease
            } else if !presence.partial {
                forget(activityID)
            }
        }
    }

    /// An activity out of view (withdrawn, lapsed, or left out of its origin's presence).
    private mutating func forget(_ activityID: String) {
        guard let record = activities.removeValue(forKey: activityID) else { return }
        activityIDsByOrigin[record.origin]?.remove(activityID)
        if activityIDsByOrigin[record.origin]?.isEmpty == true { activityIDsByOrigin[record.origin] = nil }
    }

    private mutating func advertised(_ activityID: String, type: String, origin: String, leaseMs: UInt32, now: ContinuousClock.Instant) {
        let lease: Duration = leaseMs > 0 ? .milliseconds(WireLimits.granted(leaseMs: leaseMs)) : .seconds(6)
        if activities[activityID] == nil, activities.count >= limits.activities {
            overflow += 1
            return
        }
        if let held = activities[activityID], held.origin != origin { forget(activityID) }
        activities[activityID] = ActivityRecord(type: type, origin: origin, expires: now + lease)
        activityIDsByOrigin[origin, default: []].insert(activityID)
    }

    private mutating func happened(_ event: WireNodeEvent, sender: WireNodeRef, now: ContinuousClock.Instant) {
        if event.kind == .continued {
            continuations += 1
            return
        }
        let state: BusViewSnapshot.Stream.State
        switch event.kind {
        case .streamOpened, .streamProgress: state = .open
        case .streamFinished: state = .finished
        case .streamFailed: state = .failed
        default: return
        }
        let key = sender.nodeID + "/" + String(event.streamID)
        guard var stream = streams[key] ?? newStream(event, sender: sender, now: now) else { return }
        stream.sent = max(stream.sent, event.bytesSent)
        stream.received = max(stream.received, event.bytesReceived)
        if event.expectedLength > 0 { stream.expected = event.expectedLength }
        if !event.peer.name.isEmpty { stream.peer = event.peer.name }
        if stream.state == .open { stream.state = state }
        if !event.detail.isEmpty { stream.detail = String(event.detail.prefix(200)) }
        stream.updated = now
        streams[key] = stream
    }

    private mutating func newStream(_ event: WireNodeEvent, sender: WireNodeRef, now: ContinuousClock.Instant) -> StreamRecord? {
        guard streams.count < limits.streams else {
            overflow += 1
            return nil
        }
        return StreamRecord(
            node: sender.name, peer: event.peer.name, activityType: event.activityType, streamID: event.streamID,
            sent: 0, received: 0, expected: 0, state: .open, detail: "", opened: now, updated: now)
    }

    // MARK: Rates

    private mutating func count(bytes: Int, now: ContinuousClock.Instant) {
        advanceSeconds(to: now)
        perSecond[currentSecond % Self.history].add(bytes: bytes)
        total.add(bytes: bytes)
    }

    /// Whole seconds since the view started.
    private func second(of now: ContinuousClock.Instant) -> Int {
        Int((now - started).components.seconds)
    }

    /// Moves the chart on to `now`, emptying the buckets of the seconds that passed.
    private mutating func advanceSeconds(to now: ContinuousClock.Instant) {
        let target = second(of: now)
        guard target > currentSecond else { return }
        for second in (currentSecond + 1)...min(target, currentSecond + Self.history) {
            perSecond[second % Self.history] = Count()
        }
        currentSecond = target
    }

    /// The last `history` whole seconds, oldest first (the second under way left out).
    func rates(now: ContinuousClock.Instant) -> [Count] {
        let current = max(second(of: now), currentSecond)
        return (1...Self.history).reversed().map { ago in
            let second = current - ago
            // Seconds after the last message heard are empty (their buckets are not cleared yet).
            guard second >= 0, second <= currentSecond, currentSecond - second < Self.history else { return Count() }
            return perSecond[second % Self.history]
        }
    }
}
