/// Which of a node's events about one peer's doings (wire.proto `NodeEvent`: a continue answered,
/// a stream pair opened, finished or failed) go on the bus: at most ``perSecond`` a second per
/// peer, after a burst of ``burst``.
///
/// Each event is a bus message that the broker every deployment shares takes in and passes to
/// every monitor. A peer with a valid key that opens and fails pairs, or continues an activity,
/// as fast as the node answers made the node publish two events a pair (about 6,600 a second in
/// `handoff-bench churn`) and write a log line a continue. A legitimate peer stays far below the
/// rate: a pair's lifecycle is two events, and a continue one. Held-back events are counted
/// (`handoff_node_events_held_back_total`) and logged once a minute per peer, with how many.
/// Progress events are not this budget's: they are bounded per pair (four a second) and pairs
/// per peer.
///
/// A token bucket per peer (its CURVE key when secure, else the node id it gave;
/// ``TokenBuckets``). Bounded: past ``capacity`` peers, those whose bucket has refilled are
/// forgotten, and if none has, the newcomers share one bucket. No I/O: the node passes the time in.
struct PeerEventBudget {
    static let perSecond = 50.0
    static let burst = 200.0
    static let capacity = 4_096
    /// The shared bucket's name.
    static let otherPeers = "(other peers)"

    private var buckets = TokenBuckets(perSecond: perSecond, burst: burst, capacity: capacity, overflowKey: otherPeers)

    /// Whether an event about `peer` goes on the bus now (one of its tokens is taken if so).
    mutating func admit(_ peer: String, now: ContinuousClock.Instant) -> Bool { buckets.admit(peer, now: now) }

    /// Peers remembered (for tests: the bound).
    var peers: Int { buckets.count }
}
