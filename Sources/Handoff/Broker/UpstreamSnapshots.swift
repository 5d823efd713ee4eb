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
struct UpstreamSnapshots {
    static let timeout = Duration.seconds(30)
    /// How long the other upstream of a pair is waited for once one replied.
    static let grace = Duration.seconds(1)
    /// This broker's site, named in each token (``SiteName/snapshotToken()``).
    let site: SiteName
    private(set) var requests: SnapshotRequests

    /// - Parameter upstreams: How many upstream brokers answer each request (two for a pair).
    init(site: SiteName, upstreams: Int = 1) {
        self.site = site
        requests = SnapshotRequests(expectedReplies: max(1, upstreams))
    }

    /// Whether no request is under way (what comes from upstream is all live).
    var isEmpty: Bool { requests.pending.isEmpty }

    func typePrefix(of topic: [UInt8]) -> String? { requests.pending[String(decoding: topic, as: UTF8.self)]?.typePrefix }

    /// When the next attempt after a short answer is due, if one waits.
    var nextRetry: ContinuousClock.Instant? { requests.retries.map(\.due).min() }

    /// A new request's topic, or `nil` when one for the prefix is on its way or waits to be asked again.
    mutating func ask(
        _ typePrefix: String, attempt: Int = 1, now: ContinuousClock.Instant, randomToken: @autoclosure () -> String = Topic.newSnapshotToken()
    ) -> [UInt8]? {
        guard !requests.isPending(typePrefix: typePrefix) else { return nil }
        let topic = requests.start(typePrefix: typePrefix, attempt: attempt, token: site.snapshotToken(random: randomToken()), now: now)
        return Array(topic.utf8)
    }

    /// An advertisement of the answer on `topic` arrived.
    mutating func advertisementArrived(on topic: [UInt8], now: ContinuousClock.Instant) {
        _ = requests.advertisementArrived(on: String(decoding: topic, as: UTF8.self), now: now)
    }

    /// An upstream's `SnapshotReply` on `topic`; true when the request is over (unsubscribe from
    /// it). A short one is asked again once its backoff (stretched by `jitter`, in 0..<1) is over.
    mutating func replyArrived(on topic: [UInt8], count: Int, now: ContinuousClock.Instant, jitter: Double) -> Bool {
        let topic = String(decoding: topic, as: UTF8.self)
        return end(requests.replyArrived(on: topic, count: count, now: now), now: now, jitter: jitter)
    }

    /// The attempts whose backoff is over, each asked anew: the topics to subscribe to.
    mutating func dueRetries(now: ContinuousClock.Instant, randomToken: () -> String = Topic.newSnapshotToken) -> [[UInt8]] {
        requests.dueRetries(now: now).compactMap { ask($0.typePrefix, attempt: $0.attempt, now: now, randomToken: randomToken()) }
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
