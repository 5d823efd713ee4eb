import Foundation
import HandoffWire

/// What happens in a simulated run besides the protocol's own work, drawn from the seed before the
/// run starts: the workload (activities made current, changed, resigned, invalidated, expiring)
/// and the faults (crashes and restarts, stops, partitions, duplicated messages, lies). Each entry
/// can be left out as a whole (a crash with its restart), which is how a failing run is shortened.
struct SimulationSchedule {
    enum Operation: Equatable {
        /// `once`: continue-once; `saves`: will-save runs (0.1-300 ms) before each answer.
        case create(node: Int, type: String, expiresIn: Duration?, once: Bool, saves: Bool)
        /// `count` activities of `type` made current in one call (``SimulationOptions/batches``).
        case createBatch(node: Int, type: String, count: Int)
        /// The node continues the `pick`-th activity it knows (modulo).
        case continueActivity(node: Int, pick: Int)
        /// Changes (`update`), resigns or invalidates the `pick`-th current activity of `node` (modulo).
        case update(node: Int, pick: Int)
        case resign(node: Int, pick: Int)
        case invalidate(node: Int, pick: Int)
        case crash(node: Int)
        /// The node shuts down (its activities withdrawn, its stream peers told) and exits.
        case leave(node: Int)
        case restart(node: Int)
        case stop(node: Int, duration: Duration)
        case partition(Int, Int)
        case heal(Int, Int)
        /// The next bus message from the first node to the second arrives twice.
        case duplicate(from: Int, to: Int)
        /// A hostile node forges a withdrawal of another node's activity and replays what it heard.
        case lie(node: Int, pick: Int)
        /// With brokers: one is killed, and starts again with an empty cache.
        case crashBroker(Int)
        case restartBroker(Int)
        /// With brokers: the connection between one and a node breaks, and comes back.
        case partitionBroker(Int, node: Int)
        case healBroker(Int, node: Int)
        /// At sites: a site's link to the upstream is cut, and heals.
        case cutSite(Int)
        case healSite(Int)
        /// The node opens a continuation stream pair with the origin of the `pick`-th activity it
        /// knows; each writing end writes `bytes`. A flooding (hostile) node ignores its credit.
        case openStream(node: Int, pick: Int, bytes: Int, direction: WireStreamDirection, reader: SimulatedStream.Reader, floods: Bool)
        /// A hostile node publishes a presence of a made-up node (the `serial`-th) under its own
        /// key, listing `activities` made-up ids.
        case madeUpPresence(node: Int, serial: Int, activities: Int)
        /// With brokers: a hostile node's subscriber withdraws, at each broker, the `pick`-th
        /// (modulo) of the topics other running nodes follow and it does not; libzmq's XPUB passes
        /// such a withdrawal up, with the member's key.
        case forgedWithdrawal(node: Int, pick: Int)
    }

    struct Planned {
        let at: Duration
        /// The entry it belongs to (a crash and its restart share one).
        let entry: Int
        let operation: Operation
    }

    static let types = ["org.sim.edit", "org.sim.view", "com.other.play"]
    static let followed = [["org.sim."], ["org.sim.edit"], ["com.other."], ["org.sim.", "com.other."], []]

    private(set) var planned: [Planned] = []
    private(set) var entries = 0

    /// Nothing planned: the nodes run their protocol alone (tests).
    static var empty: SimulationSchedule { SimulationSchedule() }

    private init() {}

    init(options: SimulationOptions, hostile: Set<Int>, random: inout SimulationRandom) {
        var at = Duration.zero
        let nodes = options.nodes
        while true {
            at += random.duration(.milliseconds(20)...(.milliseconds(600)))
            guard at < options.duration else { break }
            let node = Int.random(in: 0..<nodes, using: &random)
            let pick = Int.random(in: 0..<1_000, using: &random)
            let roll = Double.random(in: 0..<1, using: &random)
            switch roll {
            case ..<0.28:
                // (Drawn only with batches: without them a seed's schedule is what it was.)
                if options.batches, random.chance(0.25) {
                    add(at, .createBatch(node: node, type: Self.types.randomElement(using: &random)!, count: Int.random(in: 2...12, using: &random)))
                    continue
                }
                let expires: Duration? = random.chance(0.15) ? random.duration(.seconds(1)...(.seconds(20))) : nil
                add(at, .create(node: node, type: Self.types.randomElement(using: &random)!, expiresIn: expires,
                                once: random.chance(0.3), saves: random.chance(0.3)))
            case ..<0.46: add(at, .update(node: node, pick: pick))
            case ..<0.54: add(at, .resign(node: node, pick: pick))
            case ..<0.58: add(at, .invalidate(node: node, pick: pick))
            case ..<0.70: add(at, .continueActivity(node: node, pick: pick))
            default:
                guard options.faults else { continue }
                let other = (node + 1 + Int.random(in: 0..<(nodes - 1), using: &random)) % nodes
                switch roll {
                case ..<0.75:
                    // (Only with a broker is a draw spent on choosing it: direct runs stay as they were, seed for seed.)
                    if options.brokerCount > 0, random.chance(0.2) {
                        let broker = Self.pickBroker(options, &random)
                        add(at, .crashBroker(broker), then: at + random.duration(.milliseconds(200)...(.seconds(10))), .restartBroker(broker))
                    } else {
                        add(at, .crash(node: node), then: at + random.duration(.milliseconds(200)...(.seconds(10))), .restart(node: node))
                    }
                case ..<0.80: add(at, .stop(node: node, duration: random.duration(.milliseconds(100)...(.seconds(9)))))
                case ..<0.88:
                    if options.hasSites, random.chance(0.4) {
                        let site = Int.random(in: 1..<options.sites, using: &random)
                        add(at, .cutSite(site), then: at + random.duration(.milliseconds(100)...(.seconds(12))), .healSite(site))
                    } else if options.hasSites, random.chance(0.5) {
                        // A node's own site broker: the only one it connects to.
                        let broker = node % options.sites
                        add(at, .partitionBroker(broker, node: node), then: at + random.duration(.milliseconds(100)...(.seconds(12))), .healBroker(broker, node: node))
                    } else if !options.hasSites, options.brokerCount > 0, random.chance(0.5) {
                        let broker = Self.pickBroker(options, &random)
                        add(at, .partitionBroker(broker, node: node), then: at + random.duration(.milliseconds(100)...(.seconds(12))), .healBroker(broker, node: node))
                    } else {
                        add(at, .partition(node, other), then: at + random.duration(.milliseconds(100)...(.seconds(12))), .heal(node, other))
                    }
                case ..<0.94: add(at, .duplicate(from: node, to: other))
                default:
                    guard let liar = hostile.randomElement(using: &random) else { continue }
                    add(at, .lie(node: liar, pick: pick))
                }
            }
        }
        planned.sort { ($0.at, $0.entry) < ($1.at, $1.entry) }
    }

    /// Which broker a broker fault strikes: of a pair, one drawn (a draw spent only then, so that
    /// one-broker runs stay as they were, seed for seed).
    private static func pickBroker(_ options: SimulationOptions, _ random: inout SimulationRandom) -> Int {
        options.brokerCount > 1 ? Int.random(in: 0..<options.brokerCount, using: &random) : 0
    }

    /// Adds continuation streams, drawn from their own randomness (`random`), so that a seed's
    /// other entries stay as they were: every 1 to 8 seconds a node opens a stream of up to 48 KiB,
    /// one way or both, read promptly, slowly, with a pause past the idle timeout, or cancelled
    /// part way; a hostile node now and then floods past its credit.
    mutating func addStreams(options: SimulationOptions, hostile: Set<Int>, random: inout SimulationRandom) {
        var at = Duration.zero
        while true {
            at += random.duration(.seconds(1)...(.seconds(8)))
            guard at < options.duration else { break }
            let pick = Int.random(in: 0..<1_000, using: &random)
            if let liar = hostile.sorted().first, random.chance(0.1) {
                // Its originator's reader pauses: the flood must be refused, not buffered.
                add(at, .openStream(node: liar, pick: pick, bytes: 0, direction: .continuerToOrigin, reader: .pauses(atByte: 0, for: .seconds(5)), floods: true))
                continue
            }
            let node = Int.random(in: 0..<options.nodes, using: &random)
            let bytes = random.chance(0.1) ? 0 : Int.random(in: 1...48 * 1_024, using: &random)
            let direction: WireStreamDirection = [.originToContinuer, .originToContinuer, .continuerToOrigin, .unspecified].randomElement(using: &random)!
            let reader: SimulatedStream.Reader = switch Double.random(in: 0..<1, using: &random) {
            case ..<0.55: .prompt
            case ..<0.75: .slow(random.duration(.milliseconds(5)...(.milliseconds(150))))
            case ..<0.9: .pauses(atByte: Int.random(in: 0...max(0, bytes), using: &random), for: random.duration(.seconds(3)...(.seconds(12))))
            default: .givesUp(atByte: Int.random(in: 0...max(0, bytes), using: &random))
            }
            add(at, .openStream(node: node, pick: pick, bytes: bytes, direction: direction, reader: reader, floods: false))
        }
        planned.sort { ($0.at, $0.entry) < ($1.at, $1.entry) }
    }

    /// Adds presences of made-up nodes, each from a hostile node (drawn), every 100–300 ms, from
    /// their own randomness like the streams.
    mutating func addMadeUpPresences(options: SimulationOptions, hostile: Set<Int>, random: inout SimulationRandom) {
        addHostile(every: .milliseconds(100)...(.milliseconds(300)), options: options, hostile: hostile, random: &random) { liar, serial, random in
            .madeUpPresence(node: liar, serial: serial, activities: Int.random(in: 1...3, using: &random))
        }
    }

    /// Adds a hostile node's withdrawals of what others follow, every 1–4 s, drawn from their own
    /// randomness like the made-up presences.
    mutating func addForgedWithdrawals(options: SimulationOptions, hostile: Set<Int>, random: inout SimulationRandom) {
        addHostile(every: .seconds(1)...(.seconds(4)), options: options, hostile: hostile, random: &random) { liar, _, random in
            .forgedWithdrawal(node: liar, pick: Int.random(in: 0..<1_000, using: &random))
        }
    }

    /// Adds what a hostile node (drawn) does, every `interval` (drawn), through the run: the
    /// `serial`-th operation `operation` makes, from what it draws.
    private mutating func addHostile(
        every interval: ClosedRange<Duration>, options: SimulationOptions, hostile: Set<Int>, random: inout SimulationRandom,
        _ operation: (_ liar: Int, _ serial: Int, inout SimulationRandom) -> Operation
    ) {
        let liars = hostile.sorted()
        guard !liars.isEmpty else { return }
        var at = Duration.zero, serial = 0
        while true {
            at += random.duration(interval)
            guard at < options.duration else { break }
            let liar = liars[Int.random(in: 0..<liars.count, using: &random)]
            add(at, operation(liar, serial, &random))
            serial += 1
        }
        planned.sort { ($0.at, $0.entry) < ($1.at, $1.entry) }
    }

    /// Adds graceful departures, each with the node's return 1–15 s later (a new process,
    /// knowing nothing), drawn from their own randomness like the streams: every 10–40 s.
    mutating func addDepartures(options: SimulationOptions, random: inout SimulationRandom) {
        var at = Duration.zero
        while true {
            at += random.duration(.seconds(10)...(.seconds(40)))
            guard at < options.duration else { break }
            let node = Int.random(in: 0..<options.nodes, using: &random)
            add(at, .leave(node: node), then: at + random.duration(.seconds(1)...(.seconds(15))), .restart(node: node))
        }
        planned.sort { ($0.at, $0.entry) < ($1.at, $1.entry) }
    }

    private mutating func add(_ at: Duration, _ operation: Operation, then later: Duration? = nil, _ second: Operation? = nil) {
        planned.append(Planned(at: at, entry: entries, operation: operation))
        if let later, let second { planned.append(Planned(at: later, entry: entries, operation: second)) }
        entries += 1
    }
}
