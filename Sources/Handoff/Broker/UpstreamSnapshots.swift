import Foundation

/// The snapshots a site's broker asked upstream for, one per type prefix at a time: a first
/// subscription to a prefix at this site, or the link coming up, so that its cache (and the
/// joiner that subscribed) gets what the other sites have of it. Decided with no I/O (time, tokens
/// and jitter passed in), by the rules a node's follower keeps (``SnapshotRequests``): a short
/// answer (a queue overflowed, or an upstream busy with 64 answers replied with its count alone)
/// is asked again after a backoff, at most five attempts; with a pair upstream, each answers, and
/// one that never replies is waited for a second after the other's last message. A request whose
/// answer has not begun after ``timeout`` (the hub restarted, the link broke, or a large cache's
/// answers to others were ahead of it: a hub answers up to 64 at once, in the order asked) is
/// dropped and asked again the same way, within the same five attempts.
///
/// At most ``maxUnderWay`` prefixes are asked at once (answered, or waiting to be asked again);
/// the others wait their turn in the order they came, so that a site following thousands of
/// prefixes, whose link comes up, does not have the hub answer all but 64 of them busy. A prefix
/// nothing here follows any more is dropped, asked or waiting (``cancel(_:now:)``).
struct UpstreamSnapshots {
    static let timeout = Duration.seconds(30)
    /// Prefixes asked at once: a quarter of what a hub answers at once (``SnapshotAnswers``).
    static let maxUnderWay = 16
    /// How long the other upstream of a pair is waited for once one replied.
    static let grace = Duration.seconds(1)
    /// This broker's site, named in each token (``SiteName/snapshotToken()``).
    let site: SiteName
    private(set) var requests: SnapshotRequests
    /// Prefixes waiting for their turn, in the order asked, and when a turn came free for them.
    private var turns = SnapshotTurns()
    private var turnFreeSince: ContinuousClock.Instant?

    /// - Parameter upstreams: How many upstream brokers answer each request (two for a pair).
    init(site: SiteName, upstreams: Int = 1) {
        self.site = site
        requests = SnapshotRequests(expectedReplies: max(1, upstreams))
    }

    /// Whether answers are awaited on some topic (else what comes from upstream is all live).
    var awaitsAnswers: Bool { !requests.pending.isEmpty }
    /// Whether nothing is asked, waiting to be asked again, or waiting its turn.
    var isIdle: Bool { requests.isEmpty && turns.isEmpty }
    /// Prefixes waiting their turn, and the entries the queue holds for them (tests: the bound).
    var waitingTurn: Int { turns.count }
    var queueEntries: Int { turns.entries }

    func typePrefix(of topic: [UInt8]) -> String? { requests.pending[String(decoding: topic, as: UTF8.self)]?.typePrefix }

    /// When the next attempt after a short answer is due, or a prefix waiting its turn may be asked.
    var nextRetry: ContinuousClock.Instant? {
        let retry = requests.retries.map(\.due).min()
        guard let turnFreeSince else { return retry }
        return min(retry ?? turnFreeSince, turnFreeSince)
    }

    private var underWay: Int { requests.underWay }

    /// A new request's topic; `nil` when one for the prefix is on its way, waits to be asked
    /// again, or waits its turn (now, when ``maxUnderWay`` are under way).
    mutating func ask(
        _ typePrefix: String, now: ContinuousClock.Instant, randomToken: @autoclosure () -> String = Topic.newSnapshotToken()
    ) -> [UInt8]? {
        guard !turns.contains(typePrefix), !requests.isPending(typePrefix: typePrefix) else { return nil }
        guard underWay < Self.maxUnderWay else {
            turns.append(typePrefix)
            return nil
        }
        return start(typePrefix, attempt: 1, now: now, randomToken: randomToken())
    }

    private mutating func start(_ typePrefix: String, attempt: Int, now: ContinuousClock.Instant, randomToken: String) -> [UInt8] {
        let topic = requests.start(typePrefix: typePrefix, attempt: attempt, token: site.snapshotToken(random: randomToken), now: now)
        return Array(topic.utf8)
    }

    /// Nothing here follows `typePrefix` any more: its request dropped, asked or waiting; the
    /// topics under way to unsubscribe from.
    mutating func cancel(_ typePrefix: String, now: ContinuousClock.Instant) -> [[UInt8]] {
        turns.remove(typePrefix)
        let topics = requests.cancel(typePrefix: typePrefix)
        freedTurn(now: now)
        return topics.map { Array($0.utf8) }
    }

    /// A turn may have come free: the prefixes waiting may be asked from `now` on.
    private mutating func freedTurn(now: ContinuousClock.Instant) {
        if !turns.isEmpty, underWay < Self.maxUnderWay, turnFreeSince == nil { turnFreeSince = now }
    }

    /// An advertisement of the answer on `topic` arrived.
    mutating func advertisementArrived(on topic: [UInt8], now: ContinuousClock.Instant) {
        _ = requests.advertisementArrived(on: String(decoding: topic, as: UTF8.self), now: now)
    }

    /// An upstream's `SnapshotReply` on `topic`; true when the request is over (unsubscribe from
    /// it). A short one is asked again once its backoff (stretched by `jitter`, in 0..<1) is over.
    mutating func replyArrived(on topic: [UInt8], count: Int, now: ContinuousClock.Instant, jitter: Double) -> Bool {
        let topic = String(decoding: topic, as: UTF8.self)
        let over = end(requests.replyArrived(on: topic, count: count, now: now), now: now, jitter: jitter)
        freedTurn(now: now)
        return over
    }

    /// The attempts whose backoff is over, each asked anew, then the prefixes waiting whose turn
    /// came: the topics to subscribe to.
    mutating func dueRetries(now: ContinuousClock.Instant, randomToken: () -> String = Topic.newSnapshotToken) -> [[UInt8]] {
        var topics = requests.dueRetries(now: now).map { start($0.typePrefix, attempt: $0.attempt, now: now, randomToken: randomToken()) }
        guard let since = turnFreeSince, since <= now else { return topics }
        turnFreeSince = nil
        while underWay < Self.maxUnderWay, let typePrefix = turns.next() {
            topics.append(start(typePrefix, attempt: 1, now: now, randomToken: randomToken()))
        }
        return topics
    }

    /// Requests over by time, taken out (unsubscribe from each): one upstream of a pair replied and
    /// the other has not for ``grace`` (what arrived is what there is: whole, or asked again), or
    /// no answer began within ``timeout`` (asked again after the backoff, while attempts are left).
    mutating func expired(now: ContinuousClock.Instant, jitter: () -> Double = { .random(in: 0..<1) }) -> [[UInt8]] {
        var over = requests.expire(now: now, grace: Self.grace).filter { end($0.outcome, now: now, jitter: jitter()) }.map(\.topic)
        for (topic, request) in requests.pending {
            // (An answer still arriving, slice after slice, is not over.)
            guard request.replies == 0, let since = request.lastArrival ?? request.askedAt, now - since > Self.timeout else { continue }
            requests.drop(topic)
            over.append(topic)
            if request.attempt < SnapshotRequests.maxAttempts {
                requests.scheduleRetry(typePrefix: request.typePrefix, attempt: request.attempt + 1, now: now, jitter: jitter())
            }
        }
        if !over.isEmpty { freedTurn(now: now) }
        return over.sorted().map { Array($0.utf8) }
    }

    /// Whether `outcome` ends its request; a short one is asked again after its backoff.
    private mutating func end(_ outcome: SnapshotRequests.Outcome, now: ContinuousClock.Instant, jitter: Double) -> Bool {
        switch outcome {
        case .waiting, .unknown:
            return false
        case .complete, .incomplete:
            break
        case .retry(let typePrefix, let attempt):
            requests.scheduleRetry(typePrefix: typePrefix, attempt: attempt, now: now, jitter: jitter)
        }
        return true
    }
}
