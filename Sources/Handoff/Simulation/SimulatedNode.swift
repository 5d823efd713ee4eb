import Foundation
import HandoffWire

/// One node of a simulated fleet: the production machines (``Advertiser``, ``Follower``,
/// ``EnvelopeBuilder``) in a shell that, instead of sockets, hands what they decide to the
/// simulated network, as ``Node`` hands it to ZeroMQ (direct mode: an XPUB that answers snapshot
/// subscriptions, and one SUB per peer that checks the peer's key).
final class SimulatedNode {
    let index: Int
    let id: String
    /// Its CURVE key, as its connections authenticate it; and its bytes, as a node's record of
    /// its origin holds them (``CurveKey/bytes``).
    let key: Data
    let keyBytes: [UInt8]
    /// The type prefixes it follows.
    let follows: [String]
    /// Whether it sends lies (forged news of others' activities, replays of what it heard).
    let hostile: Bool
    private(set) var advertiser: Advertiser
    private(set) var follower: Follower
    /// Its continuing side: what waits is the request's number in the world.
    var client = SimulatedNode.newClient()
    private var envelopes: EnvelopeBuilder
    var alive = true
    /// Which process of this node this is (it counts restarts).
    private(set) var incarnation = 0
    /// The activities its continue requests are for, by correlation id.
    var asked: [UInt64: DiscoveredActivity] = [:]
    /// The refreshes (did-update fetches) among them, by the truth's request number: the
    /// activity each fetches.
    var refreshes: [Int: String] = [:]
    var continueEndpoint: String { "tcp://\(id):7000" }
    /// Until when it is stopped (SIGSTOP): it does nothing, and what reaches it waits.
    var stoppedUntil: Duration?
    /// When it last went on after a stop or a restart, as the world took the event.
    var resumedAt = Duration.zero
    /// When it last went on, for the invariants: at the end of its stop as soon as it counts as
    /// running (``isRunning(at:)``), though the world has not yet taken the resume event due at
    /// that very instant (another event of the instant came first: seed 602246869 judged the
    /// origin reachable since before its stop, in the step before its resume).
    var wentOnAt: Duration { max(resumedAt, stoppedUntil ?? .zero) }
    /// Which topics each peer's subscriber subscribed to here (ZeroMQ filters at the publisher).
    var subscriptionsOfPeer: [Int: Set<String>] = [:]
    /// What its own subscribers subscribe to (the same on the connection to every peer).
    private(set) var subscriptions: Set<String> = []
    /// Counters of what it refused (for the report).
    var refused = 0
    /// Envelopes heard from others, that a hostile node sends again.
    var heard: [(topic: [UInt8], envelope: WireEnvelope)] = []

    static let settings = (lease: Duration.seconds(6), advertiseInterval: Duration.seconds(2), refreshInterval: Duration.seconds(25))

    /// Messages per slice of its advertiser's passes (``SimulationOptions/sliceSize``).
    let sliceSize: Int
    /// Snapshots its follower asks at once (``SimulationOptions/snapshotsAtOnce``).
    let snapshotsAtOnce: Int

    init(
        index: Int, follows: [String], hostile: Bool, peers: Int, sliceSize: Int, snapshotsAtOnce: Int,
        now: ContinuousClock.Instant, date: Date, random: inout SimulationRandom
    ) {
        self.index = index
        self.sliceSize = sliceSize
        self.snapshotsAtOnce = snapshotsAtOnce
        id = "node-\(index)"
        keyBytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }
        key = Data(keyBytes)
        self.follows = follows
        self.hostile = hostile
        (advertiser, follower, envelopes) = Self.machines(id: id, key: key, peers: peers, sliceSize: sliceSize, snapshotsAtOnce: snapshotsAtOnce, now: now, date: date)
    }

    private static func machines(
        id: String, key: Data, peers: Int, sliceSize: Int, snapshotsAtOnce: Int, now: ContinuousClock.Instant, date: Date
    ) -> (Advertiser, Follower, EnvelopeBuilder) {
        var origin = WireNodeRef()
        origin.nodeID = id
        origin.name = id
        origin.host = "sim"
        origin.publicKey = key
        let advertiser = Advertiser(.init(
            origin: origin, continueEndpoint: "tcp://\(id):7000", lease: settings.lease, teamID: nil,
            advertiseInterval: settings.advertiseInterval, refreshInterval: settings.refreshInterval, sliceSize: sliceSize), now: now)
        let follower = Follower(.init(
            nodeID: id, defaultLease: settings.lease, maxKnownPerNode: 1_000, maxKnown: 10_000,
            replayWindow: .seconds(30), secure: true, snapshotAnswerers: peers, snapshotsAtOnce: snapshotsAtOnce))
        return (advertiser, follower, EnvelopeBuilder(sender: origin, startingAt: date))
    }

    /// Continue requests wait this long for their originator.
    static let continueTimeout = Duration.seconds(3)

    /// A continuation client with a handler for every type the workload makes.
    static func newClient() -> ContinuationClient<Int, String> {
        var client = ContinuationClient<Int, String>(teamPolicy: .sameTeam, timeout: continueTimeout)
        for type in SimulationSchedule.types { client.register("restore \(type)", forType: type, teamID: nil) }
        return client
    }

    /// The process died and a new one starts under the same id and key, knowing nothing.
    func restart(peers: Int, now: ContinuousClock.Instant, date: Date) {
        (advertiser, follower, envelopes) = Self.machines(id: id, key: key, peers: peers, sliceSize: sliceSize, snapshotsAtOnce: snapshotsAtOnce, now: now, date: date)
        subscriptions = []
        subscriptionsOfPeer = [:]
        client = Self.newClient()
        asked = [:]
        refreshes = [:]
        incarnation += 1
        heard = []
    }

    func isRunning(at now: Duration) -> Bool {
        alive && (stoppedUntil.map { now >= $0 } ?? true)
    }

    func envelope(_ body: WireEnvelope.OneOf_Body, date: Date) -> WireEnvelope {
        envelopes.envelope(body, sentAt: date)
    }

    // MARK: Machines, driven by the world

    func useRandomness(tokens: @escaping () -> String, jitter: @escaping () -> Double) {
        follower.makeToken = tokens
        follower.drawJitter = jitter
    }

    func advertiserDo<T>(_ body: (inout Advertiser) -> T) -> T { body(&advertiser) }

    func followerDo<T>(_ body: (inout Follower) -> T) -> T { body(&follower) }
    /// The version its follower knows of an activity, if any: the invariants' question after every step.
    func knownVersion(_ id: HashedID) -> UInt64? { follower.known.version(of: id) }
    /// Which table of known activities its follower has (its process) and how many ids came into
    /// it: while both stay the same, nothing the follower did not know has appeared.
    var knownArrivals: KnownArrivals { KnownArrivals(incarnation: incarnation, arrivals: follower.known.arrivals) }

    func subscribed(_ topic: String) { subscriptions.insert(topic) }

    func unsubscribed(_ topic: String) { subscriptions.remove(topic) }
}
