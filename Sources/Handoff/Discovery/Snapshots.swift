import HandoffWire

/// Snapshots, the ZeroMQ guide's Clone pattern (wire.proto, "Snapshots"): a node that starts to
/// follow a type prefix subscribes to `S:` + a fresh token + `/` + the prefix, and whoever answers
/// (the broker, or each direct peer) publishes what is current under exactly that topic, then a
/// `SnapshotReply`. Nobody else hears it again.
extension Topic {
    /// One subscriber's snapshot: `S:` + 32 hexadecimal digits + `/` + the type prefix.
    static let snapshotPrefix = "S:"
    /// ``snapshotPrefix`` as the bytes a topic frame starts with.
    static let snapshotPrefixBytes = Array(snapshotPrefix.utf8)
    /// Length of a snapshot token (hexadecimal digits).
    static let snapshotTokenLength = 32

    /// The topic that asks for a snapshot of the activities whose type starts with `typePrefix`.
    static func snapshot(token: String, typePrefix: String) -> String {
        snapshotPrefix + token + "/" + typePrefix
    }

    /// A new random snapshot token.
    static func newSnapshotToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return newSnapshotToken(using: &generator)
    }

    /// A new snapshot token from `generator` (the simulator's seeded one).
    static func newSnapshotToken(using generator: inout some RandomNumberGenerator) -> String {
        let digits = Array("0123456789abcdef")
        return String((0..<snapshotTokenLength).map { _ in digits[Int(generator.next() % 16)] })
    }

    /// The type prefix a snapshot topic asks for, or `nil` when `topic` is not a well-formed one.
    static func snapshotTypePrefix(_ topic: some Collection<UInt8>) -> String? {
        let prefix = snapshotPrefixBytes
        guard topic.count >= prefix.count + snapshotTokenLength + 1, topic.starts(with: prefix) else { return nil }
        let token = topic.dropFirst(prefix.count).prefix(snapshotTokenLength)
        guard token.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else { return nil }
        let rest = topic.dropFirst(prefix.count + snapshotTokenLength)
        guard rest.first == UInt8(ascii: "/") else { return nil }
        return String(decoding: rest.dropFirst(), as: UTF8.self)
    }
}

/// The snapshots a node has asked for and not yet received whole: which topic asks for which type
/// prefix, how many advertisements arrived on it, and how many its answerers said they sent.
///
/// Pure state: the node subscribes and unsubscribes as the outcomes say.
struct SnapshotRequests {
    struct Request: Equatable {
        let typePrefix: String
        let attempt: Int
        var received = 0
        var promised = 0
        var replies = 0
        /// When anything last arrived on the topic: once an answerer replied, the grace for the
        /// others runs from here, so that one still sending (its answer goes out in slices) holds
        /// it open.
        var lastArrival: ContinuousClock.Instant?
        /// When it was asked, if the asker gives up on answers that never begin (a site's broker).
        var askedAt: ContinuousClock.Instant?
    }

    /// What a node does after an answer arrived.
    enum Outcome: Equatable {
        /// Not every answerer has answered yet: keep the subscription.
        case waiting
        /// Whole: unsubscribe.
        case complete
        /// Fewer advertisements arrived than were sent (a queue overflowed on the way, or an
        /// answerer busy with other snapshots replied with its count alone): unsubscribe, and ask
        /// again for the same type prefix once its backoff is over (``scheduleRetry(_:now:jitter:)``).
        case retry(typePrefix: String, attempt: Int)
        /// Still short after the last attempt: unsubscribe; re-advertisement fills the gap.
        case incomplete(typePrefix: String, received: Int, promised: Int)
        /// Not a snapshot this node is waiting for (a late answer to one it already finished).
        case unknown
    }

    /// A short snapshot to ask for again once its backoff is over.
    struct Retry: Equatable {
        let typePrefix: String
        let attempt: Int
        let due: ContinuousClock.Instant
    }

    /// Answerers per request: 1 with a broker, the number of peers in direct mode.
    let expectedReplies: Int
    /// Attempts per type prefix before a short snapshot is accepted as it is: with the backoff
    /// (``retryDelay(attempt:jitter:)``) they span 3.75 to 5.6 s, longer than a busy answerer
    /// takes to send the answers it is busy with (64 of them, at its slice rate).
    static let maxAttempts = 5
    /// The backoff before the first attempt again; it doubles with each attempt after.
    static let firstRetryDelay = Duration.milliseconds(250)
    private(set) var pending: [String: Request] = [:]
    /// Short snapshots waiting for their backoff to end, in the order they came short.
    private(set) var retries: [Retry] = []
    /// Type prefixes a round of resynchronization wanted while a request for them was under way,
    /// asked before the round's news: asked again once it ends (``wanted(typePrefix:)``).
    private(set) var owed: Set<String> = []

    init(expectedReplies: Int) {
        self.expectedReplies = expectedReplies
    }

    /// Whether every snapshot asked for has arrived whole (or given up on): none under way, none
    /// waiting to be asked again, none owed.
    var isEmpty: Bool { pending.isEmpty && retries.isEmpty && owed.isEmpty }
    /// Requests that hold a turn of their asker (``SnapshotTurns``): asked and not answered, or
    /// waiting to be asked again.
    var underWay: Int { pending.count + retries.count }

    /// Whether a snapshot of `typePrefix` is asked for and not yet answered, or waits to be asked again.
    func isPending(typePrefix: String) -> Bool {
        isUnderWay(typePrefix) || waitsToBeAskedAgain(typePrefix)
    }

    /// A round of resynchronization wants a snapshot of `typePrefix` (something it heard says this
    /// node missed what the bus carried): whether to ask for one now. Not while one waits to be
    /// asked again (that attempt is asked after the news). Not while one is under way either, but
    /// that one was asked before the news, so its answers need not hold what the round is for (an
    /// answerer stopped when it was asked, and gone on since, answers it too late or not at all):
    /// the prefix is owed a request of its own once that one ends (``owedNow()``), and the round
    /// settles only after it (``isEmpty``). Found by the simulator, seed 335836501 with `--slice 2`.
    mutating func wanted(typePrefix: String) -> Bool {
        if isUnderWay(typePrefix) {
            owed.insert(typePrefix)
            return false
        }
        return !waitsToBeAskedAgain(typePrefix)
    }

    /// The owed type prefixes whose earlier request has ended, taken off the list: each to ask
    /// for now, but those waiting to be asked again (their attempt is asked after the news).
    mutating func owedNow() -> [String] {
        guard !owed.isEmpty else { return [] }
        let ended = owed.filter { !isUnderWay($0) }
        owed.subtract(ended)
        return ended.filter { !waitsToBeAskedAgain($0) }.sorted()
    }

    private func isUnderWay(_ typePrefix: String) -> Bool {
        pending.values.contains { $0.typePrefix == typePrefix }
    }

    private func waitsToBeAskedAgain(_ typePrefix: String) -> Bool {
        retries.contains { $0.typePrefix == typePrefix }
    }

    /// How long `attempt` (the second or a later one) waits after the short answer before it:
    /// ``firstRetryDelay``, doubled for each attempt after the second, and stretched by up to half
    /// again by `jitter` (in 0..<1, drawn by the caller), so that askers an answerer refused at
    /// once (busy) do not all ask again at once. An answer short because a queue overflowed waits
    /// too, so that the queue drains before the same answer comes again.
    static func retryDelay(attempt: Int, jitter: Double) -> Duration {
        let doubled = firstRetryDelay * (1 << min(max(attempt - 2, 0), 16))
        return doubled * (1 + min(max(jitter, 0), 1) / 2)
    }

    /// Puts off the attempt a ``Outcome/retry(typePrefix:attempt:)`` asks for until its backoff is over.
    mutating func scheduleRetry(typePrefix: String, attempt: Int, now: ContinuousClock.Instant, jitter: Double) {
        retries.append(Retry(typePrefix: typePrefix, attempt: attempt, due: now + Self.retryDelay(attempt: attempt, jitter: jitter)))
    }

    /// The attempts whose backoff is over, taken off the list: the caller starts each.
    mutating func dueRetries(now: ContinuousClock.Instant) -> [Retry] {
        guard retries.contains(where: { $0.due <= now }) else { return [] }
        let due = retries.filter { $0.due <= now }
        retries.removeAll { $0.due <= now }
        return due
    }

    /// Starts a request for `typePrefix`; returns the topic to subscribe to.
    mutating func start(typePrefix: String, attempt: Int = 1, token: String = Topic.newSnapshotToken(), now: ContinuousClock.Instant? = nil) -> String {
        let topic = Topic.snapshot(token: token, typePrefix: typePrefix)
        pending[topic] = Request(typePrefix: typePrefix, attempt: attempt, askedAt: now)
        return topic
    }

    /// Counts an advertisement that arrived on `topic`; `false` when no request waits on it.
    mutating func advertisementArrived(on topic: String, now: ContinuousClock.Instant) -> Bool {
        guard pending[topic] != nil else { return false }
        pending[topic]!.received += 1
        pending[topic]!.lastArrival = now
        return true
    }

    /// Takes an answerer's `SnapshotReply` that arrived on `topic`.
    mutating func replyArrived(on topic: String, count: Int, now: ContinuousClock.Instant = .now) -> Outcome {
        guard var request = pending[topic] else { return .unknown }
        request.replies += 1
        request.promised += count
        request.lastArrival = now
        guard request.replies >= expectedReplies else {
            pending[topic] = request
            return .waiting
        }
        pending[topic] = nil
        return Self.outcome(of: request)
    }

    /// Ends the requests that some answerers replied to while others (a broker of a pair that is
    /// down, a direct peer that is gone) never did, once nothing arrived on them for `grace`:
    /// what arrived is what there is. Returns each one's topic and outcome.
    mutating func expire(now: ContinuousClock.Instant, grace: Duration) -> [(topic: String, outcome: Outcome)] {
        let due = pending.filter { $0.value.replies > 0 && $0.value.lastArrival.map { now - $0 >= grace } ?? false }
        for topic in due.keys { pending[topic] = nil }
        return due.map { ($0.key, Self.outcome(of: $0.value)) }
    }

    private static func outcome(of request: Request) -> Outcome {
        if request.received >= request.promised { return .complete }
        if request.attempt < Self.maxAttempts {
            return .retry(typePrefix: request.typePrefix, attempt: request.attempt + 1)
        }
        return .incomplete(typePrefix: request.typePrefix, received: request.received, promised: request.promised)
    }

    /// Drops the request on `topic` (its answer never began), as if never made.
    mutating func drop(_ topic: String) { pending[topic] = nil }

    /// Drops the requests for `typePrefix` (nothing follows it any more), and its attempts waiting
    /// to be made; returns the topics of those under way.
    mutating func cancel(typePrefix: String) -> [String] {
        retries.removeAll { $0.typePrefix == typePrefix }
        owed.remove(typePrefix)
        let topics = pending.filter { $0.value.typePrefix == typePrefix }.map(\.key)
        for topic in topics { pending[topic] = nil }
        return topics
    }
}

extension WireSnapshotReply {
    init(count: Int, typePrefix: String) {
        self.init()
        self.count = UInt32(clamping: count)
        self.typePrefix = typePrefix
    }
}
