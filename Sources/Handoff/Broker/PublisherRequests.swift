/// Subscribers' requests that a broker passes to its publishers (wire.proto): `R:` + a node id,
/// that the node advertise again (sent by the brokers of sites), and `X:` + a trace request (sent
/// by a tracer, `handoff trace`). Each reaches every publisher, so each is checked for its shape
/// and taken within a budget: a token bucket per subscriber's key on a secure broker, ten a second
/// after a burst of fifty (a node never sends `R:`, a tracer one `X:` a trace), a relay's not
/// counted (its site's broker holds its own subscribers to the same budget), and one bucket of a
/// thousand a second for all on an open broker. Each goes on subscribed and withdrawn at once, so
/// that nothing of it stands in the publishers' subscriptions however many a member sends.
struct PublisherRequests {
    static let perKeyPerSecond = 10.0
    static let perKeyBurst = 50.0
    static let openPerSecond = 1_000.0
    static let openBurst = 5_000.0

    private var perKey = TokenBuckets<[UInt8]>(perSecond: perKeyPerSecond, burst: perKeyBurst, capacity: 4_096, overflowKey: [])
    private var open = TokenBuckets<Bool>(perSecond: openPerSecond, burst: openBurst, capacity: 1, overflowKey: true)

    /// Whether `topic` (after the 1 byte) is a request for the publishers: `R:` (but `R:*`, a
    /// site's broker's own from above) or `X:`.
    static func isRequest(_ topic: some Collection<UInt8>) -> Bool {
        (topic.starts(with: Topic.readvertisePrefixBytes) && !topic.starts(with: Topic.readvertiseAllPrefixBytes))
            || topic.starts(with: Topic.traceRequestPrefixBytes)
    }

    /// Whether a request has the contract's shape: `R:` + a node id (1 to 128 bytes), or `X:` +
    /// origin + `/` + trace id + `/` + activity id (``TraceRequest``).
    static func isWellFormed(_ topic: some Collection<UInt8>) -> Bool {
        if topic.starts(with: Topic.readvertisePrefixBytes) {
            return (1...WireLimits.maxNodeID).contains(topic.count - Topic.readvertisePrefixBytes.count)
        }
        let rest = topic.dropFirst(Topic.traceRequestPrefixBytes.count)
        guard let slash = rest.firstIndex(of: UInt8(ascii: "/")) else { return false }
        let origin = rest[..<slash]
        return (1...WireLimits.maxNodeID).contains(origin.count)
            && TraceRequest(topic: topic, nodeID: String(decoding: origin, as: UTF8.self)) != nil
    }

    /// Whether a request from a subscriber with `key` (`nil` on an open broker) goes on now.
    mutating func admit(key: [UInt8]?, relay: Bool, now: ContinuousClock.Instant) -> Bool {
        if relay { return true }
        guard let key else { return open.admit(true, now: now) }
        return perKey.admit(key, now: now)
    }
}
