import Foundation

/// How big and how hostile a simulated run is.
public struct SimulationOptions: Sendable, Hashable {
    /// Nodes in the fleet (direct mode: each subscribes to every other).
    public var nodes = 6
    /// Virtual time the run lasts.
    public var duration = Duration.seconds(60)
    /// The most a message takes on its way.
    public var maxLatency = Duration.milliseconds(20)
    /// Whether crashes, stops, partitions and duplicates happen.
    public var faults = true
    /// How many nodes lie (forged withdrawals, replays).
    public var hostileNodes = 1
    /// Whether the bus goes through a broker (the production ``BrokerCore``, which may also crash,
    /// restart with an empty cache and be cut off from single nodes) instead of node to node.
    /// Continue requests go node to node either way.
    public var broker = false
    /// With `broker`: a pair of brokers, both active (every node publishes to both and subscribes
    /// at both, as `Configuration.Bus.brokers`), each crashing and cut off from nodes on its own.
    public var brokerPair = false
    /// With `broker`: this many sites (2 or more; 0: one site), each with a broker of its own,
    /// joined in a tree: site s's upstream (`handoff broker --upstream`) is site (s − 1) / 2's, so
    /// that three sites are a hub and two below it, and a fourth is two levels down. The nodes are
    /// spread over them (node i at site i mod sites). A site's link to its upstream is cut and
    /// heals, and any site's broker may crash. Not with `brokerPair`.
    public var sites = 0
    /// At sites, the upstream of site `site` (above 0).
    func upstreamSite(of site: Int) -> Int { (site - 1) / 2 }
    /// At sites, how many links a site is below site 0; the tree's depth.
    func depth(ofSite site: Int) -> Int {
        var (site, depth) = (site, 0)
        while site > 0 { (site, depth) = (upstreamSite(of: site), depth + 1) }
        return depth
    }
    var siteDepth: Int { hasSites ? depth(ofSite: sites - 1) : 0 }
    /// How many brokers the bus goes through (0: node to node).
    var brokerCount: Int { broker ? (sites > 1 ? sites : brokerPair ? 2 : 1) : 0 }
    /// Whether the brokers are sites' (each node at one) rather than one, or a pair every node uses.
    var hasSites: Bool { broker && sites > 1 }
    /// Whether nodes open continuation streams (drawn apart from the rest of the schedule: a
    /// seed's other entries are the same either way).
    public var streams = true
    /// Whether nodes leave gracefully (shut down, withdrawing what they advertised) and come back
    /// (drawn apart too; a seed with departures differs from one without from the first).
    public var departures = true
    /// Whether the hostile nodes also publish presences of made-up nodes (a fresh node id each,
    /// under their own key, listing one to three made-up activity ids), every 100–300 ms (drawn
    /// apart, as streams are; the messages change every later step). Such a presence would have
    /// every follower ask all its snapshots again, and every broker ask its origin to advertise
    /// again, each time: the hold-backs (``Resynchronization``, ``ReadvertiseRequests``) bound
    /// that, and honest repair must still meet every invariant.
    public var madeUpPresences = false
    /// Messages per slice of a node's pass over many activities (`nil`: the production
    /// ``Advertiser/bulkSlice``, 1,000, which no simulated node reaches). A few make the passes
    /// and snapshot answers of every node go out in slices, under the same faults.
    public var sliceSize: Int?
    /// Whether a node also makes several activities current in one call (2-12 of a type, as
    /// `Node.becomeCurrent([…])` does: ``Advertiser/addAll(_:now:)``), a quarter of its creations
    /// (drawn apart: without it a seed's schedule is what it was). With ``sliceSize`` a batch
    /// outgrows its first slice, and its rest goes out in slices, under the same faults.
    public var batches = false
    /// Snapshots a node's follower asks at once (`nil`: the production
    /// ``Follower/maxSnapshotsUnderWay``, 32, which no simulated node reaches: each follows two
    /// prefixes at most). One has every node's snapshots, and each round's, take turns.
    public var snapshotsAtOnce: Int?
    /// With `broker`: whether the brokers keep their last-value cache (at sites, the hub's: a
    /// broker that joins an upstream needs its cache, ``Broker/start(_:context:)``). Without it
    /// (`handoff broker --no-cache`) a broker's frontend asks its publishers (at the hub, the
    /// sites' up sockets among them) for each prefix its subscribers and sites below follow
    /// (``ForwardedInterest``), with XSUB's counting and libzmq's withdrawals, instead of
    /// everything; its snapshots come back empty, so a follower learns what went past it at the
    /// origin's next refresh.
    public var lastValueCache = true
    /// How far each node's wall clock may be from true time: its offset is drawn within ± this
    /// (``SimulatedClocks``), so two nodes' clocks differ by up to twice this. Zero: every clock
    /// reads true time. Within what the configuration allows (docs/operations.md, "Clocks"),
    /// every invariant must hold.
    public var clockSkew = Duration.zero

    public init() {}
}

/// An invariant a run broke: its name, what was wrong, and when.
public struct SimulationFailure: Error, Sendable, Hashable, CustomStringConvertible {
    public let invariant: String
    public let detail: String
    /// Virtual time since the run started.
    public let at: Duration
    /// The step (event) it was found after.
    public let step: Int

    public var description: String { "\(invariant) broken at \(at) (step \(step)): \(detail)" }
}

/// What one seed's run did.
public struct SimulationReport: Sendable {
    public let seed: UInt64
    public let failure: SimulationFailure?
    public let steps: Int
    /// Bus messages delivered.
    public let deliveries: Int
    /// Activities made.
    public let activities: Int
    /// Messages the followers refused (forged, replayed, duplicated).
    public let refused: Int
    /// Activities handed over to a continuing node (continue requests answered with the activity).
    public let continuations: Int
    /// Did-updates told: a held activity fetched again at a newer version.
    public let didUpdates: Int
    /// Continuation streams opened, and those whose readers got every byte, verified.
    public let streams: Int
    public let streamsWhole: Int
    /// Streams a hostile originator lied about (a changed chunk, a wrong length or CRC-32C at the
    /// end) whose reader caught the lie.
    public let streamLiesCaught: Int
    /// Streams whose writing applications got stuck, given up on by the stall timeout.
    public let streamsStalled: Int
    /// Presences of made-up nodes the hostile nodes published (``SimulationOptions/madeUpPresences``).
    public let madeUpPresences: Int
    /// Rounds of snapshot requests the followers started (every reason: a reconnection, a
    /// presence naming what they lack, a silence), and origins the brokers asked to advertise
    /// again, one by one and all at once: what made-up presences would multiply.
    public let snapshotRounds: Int
    public let originsAsked: Int
    public let everyoneAsked: Int
    /// Bus messages that reached a broker from its publishers while none of its subscribers
    /// followed their topic: without the cache (``SimulationOptions/lastValueCache``), what the
    /// publishers send that the prefixes forwarded to them should have kept at home.
    public let unfollowedAtBrokers: Int
    /// The schedule's entries (workload and faults), and those left out.
    public let entries: Int
    public let skipped: Set<Int>
    /// What happened, step by step, when traced.
    public let trace: [String]
}

/// The deterministic simulator: a fleet of nodes running the production protocol machines
/// (``Advertiser``, ``Follower``) on a virtual clock, with a seeded workload and seeded faults,
/// and invariants checked after every step. One seed is one run; a failure replays from its seed.
///
/// Dictionary order must not vary between runs of a seed: `handoff-sim` runs with
/// `SWIFT_DETERMINISTIC_HASHING=1`.
public enum Simulation {
    /// Runs one seed.
    public static func run(seed: UInt64, options: SimulationOptions = .init(), trace: Bool = false, skipping: Set<Int> = []) -> SimulationReport {
        var lines: [String] = []
        var random = SimulationRandom(seed: seed)
        var hostile: Set<Int> = []
        while hostile.count < min(options.hostileNodes, options.nodes - 2) { hostile.insert(Int.random(in: 0..<options.nodes, using: &random)) }
        var schedule = SimulationSchedule(options: options, hostile: hostile, random: &random)
        if options.streams {
            var streamRandom = SimulationRandom(seed: seed ^ 0x0057_4EA3_5EED_0001)
            schedule.addStreams(options: options, hostile: hostile, random: &streamRandom)
        }
        if options.madeUpPresences {
            var liarRandom = SimulationRandom(seed: seed ^ 0x0F4C_E0FF_1CE5_0003)
            schedule.addMadeUpPresences(options: options, hostile: hostile, random: &liarRandom)
        }
        if options.broker {
            var withdrawalRandom = SimulationRandom(seed: seed ^ 0x00F0_26ED_0A11_0004)
            schedule.addForgedWithdrawals(options: options, hostile: hostile, random: &withdrawalRandom)
        }
        if options.departures {
            var departureRandom = SimulationRandom(seed: seed ^ 0x00DE_9A27_0BE5_0002)
            schedule.addDepartures(options: options, random: &departureRandom)
        }
        let world = SimulatedWorld(options: options, seed: seed, hostile: hostile, trace: trace ? { lines.append($0) } : nil)
        if trace { world.log("seed \(seed): \(options.nodes) nodes\(options.hasSites ? " at \(options.sites) sites" : options.broker ? (options.brokerPair ? " through a broker pair" : " through a broker") : "")\(options.lastValueCache ? "" : " without its cache")\(options.clockSkew > .zero ? ", clocks off by \(world.clocks.offsets.map { "\($0)" })" : "") (hostile: \(hostile.sorted().map { "node-\($0)" })), following \(world.nodes.map(\.follows)), \(schedule.entries - skipping.count) of \(schedule.entries) schedule entries") }
        let failure = world.run(schedule, skipping: skipping) { world, touched in SimulationInvariants.check(world, touched: touched) }
        if let failure, trace { world.log("FAILED: \(failure)") }
        return SimulationReport(
            seed: seed, failure: failure, steps: world.steps, deliveries: world.deliveries,
            activities: world.truth.inOrder.count, refused: world.nodes.reduce(0) { $0 + $1.refused } + world.brokers.reduce(0) { $0 + $1.refused },
            continuations: world.truth.handedOver.values.reduce(0, +), didUpdates: world.truth.didUpdates.count,
            streams: world.streams.count, streamsWhole: world.streams.count { $0.ends.contains { $0?.readWhole == true } },
            streamLiesCaught: world.streams.count(where: \.lieCaught),
            streamsStalled: world.streams.count { $0.stuck && $0.ends.contains { $0?.failure?.details["scope"] == "stalled" } },
            madeUpPresences: world.madeUpPresences, snapshotRounds: world.snapshotRounds,
            originsAsked: world.originsAsked, everyoneAsked: world.everyoneAsked,
            unfollowedAtBrokers: world.unfollowedAtBrokers, entries: schedule.entries, skipped: skipping, trace: lines)
    }

    /// The shortest schedule found that still breaks the same invariant: entries (a crash with
    /// its restart, a partition with its heal, one workload step) are left out one at a time, and
    /// stay out when the run still fails the same way.
    public static func shorten(_ report: SimulationReport, options: SimulationOptions = .init()) -> SimulationReport {
        guard let failure = report.failure else { return report }
        var skipped = report.skipped
        var best = report
        for entry in (0..<report.entries).reversed() where !skipped.contains(entry) {
            let attempt = run(seed: report.seed, options: options, skipping: skipped.union([entry]))
            if attempt.failure?.invariant == failure.invariant {
                skipped.insert(entry)
                best = attempt
            }
        }
        return best
    }
}
