import ZeroMQ

/// What a site's broker passes to its publishers for a subscribe-all from above, so that each link
/// that comes up above the site reaches the site's nodes, and none goes round a loop.
///
/// An upstream's own subscribe-all (its XSUB's, when this broker's link to it connects) is passed
/// on as `R:*` + a fresh token, subscribed and withdrawn at once (``Topic/readvertiseAllPrefix``).
/// The brokers below pass each token on once, the first time they hear it. So links that heal one
/// after another above a site each make a token of their own and each reach its nodes, which
/// advertise again, however close together they heal; and a token that comes back round links
/// misconfigured into a loop (each broker the other's upstream) is one this broker passed already,
/// and ends there. (A plain subscribe-all passed on, as before, could not tell the two apart: a
/// third heal within two seconds was taken for a loop's echo and lost.)
///
/// No I/O: the broker loop and the simulator pass the time and the token's randomness in.
struct UpstreamCascades {
    /// How long a token passed is remembered: far longer than a loop of links takes to bring it back.
    static let memory = Duration.seconds(60)
    /// Tokens remembered at most (``RecentNames``): a broker's links make one each time they connect.
    static let capacity = 10_000
    /// The longest token passed on: a longer one is no broker's, and is dropped.
    static let maxTokenLength = 64

    private var passed = RecentNames<[UInt8]>(memory: memory, capacity: capacity)

    /// Whether `subscription` (1 or 0, then a topic) is a token from above, which this type alone
    /// decides on (the subscription gate does not hold it back: each token passes once anyway).
    static func isToken(_ subscription: [UInt8]) -> Bool {
        subscription.dropFirst().starts(with: Topic.readvertiseAllPrefixBytes)
    }

    /// The frames to pass to this site's publishers for `subscription`, an upstream's (one that
    /// ``UpstreamSubscriptionGate`` let through, when it gates it). Every subscription goes as a
    /// pair, subscribed and withdrawn at once, and every withdrawal from above goes nowhere: this
    /// broker withdraws what it passes itself. Its subscribe-all becomes a fresh token; a token
    /// from above passes the first time it is heard and never after; anything else (`R:` + node
    /// id, `X:`) goes as it is.
    ///
    /// Why withdrawals from above go nowhere: the site broker's XSUB counts each topic's
    /// subscriptions and sends a withdrawal only when its count ends. The upstream's subscribe-all
    /// withdrawn (the link dropped) would take this broker's own from its publishers, since the
    /// upstream's was passed as a token. And a request held back by the gate, passed when its
    /// second ends, would follow its own withdrawal, which passed at once: the request would stay
    /// counted, and the XSUB would send it to every publisher that connects after.
    mutating func publishing(_ subscription: [UInt8], now: ContinuousClock.Instant, token: () -> String) -> [[UInt8]] {
        guard subscription.first == 1 else { return [] }
        if subscription == [1] {
            let fresh = Topic.readvertiseAllPrefixBytes + Array(token().utf8.prefix(Self.maxTokenLength))
            passed.heard(fresh, now: now)
            return [[1] + fresh, [0] + fresh]
        }
        let topic = Array(subscription.dropFirst())
        guard Self.isToken(subscription) else { return [subscription, [0] + topic] }
        guard topic.count <= Topic.readvertiseAllPrefixBytes.count + Self.maxTokenLength,
              !passed.contains(topic, now: now) else { return [] }
        passed.heard(topic, now: now)
        return [[1] + topic, [0] + topic]
    }

    /// Whether `frame`, one passed to this site's publishers, is a subscribe-all (a token's): the
    /// site then asks upstream again for the snapshot of every type it follows.
    static func isSubscribeAll(_ frame: [UInt8]) -> Bool { frame.first == 1 && isToken(frame) }
}
