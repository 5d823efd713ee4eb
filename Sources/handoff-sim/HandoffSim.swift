import ArgumentParser
import Foundation
import Glibc
import Handoff

/// `handoff-sim`: runs the deterministic simulator over many seeds, or replays one.
@main
struct HandoffSim: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "handoff-sim",
        abstract: "Runs fleets of simulated nodes (the production protocol machines) under seeded workloads and faults, checking invariants after every step.",
        discussion: """
            Every run of a seed is the same run: a failure prints its seed and the shortest schedule \
            found that still fails; `--seed S --trace` replays it step by step. See docs/testing.md.
            """)

    @Option(help: "How many seeds to run, from --first (or from a random one, printed).")
    var seeds = 100

    @Option(help: "The first seed of a --seeds run.")
    var first: UInt64?

    @Option(help: "Run this one seed (with --trace: print every step).")
    var seed: UInt64?

    @Flag(help: "Print what happens, step by step (with --seed).")
    var trace = false

    @Option(help: "Nodes per fleet.")
    var nodes = 6

    @Option(help: "Virtual seconds per run.")
    var seconds = 60

    @Flag(help: "No crashes, stops, partitions or duplicates.")
    var noFaults = false

    @Flag(help: "The bus through a broker (which also crashes, restarts empty, and is cut off from nodes) instead of node to node.")
    var broker = false

    @Flag(help: "With --broker: a pair of brokers, both active (every node publishes to both and subscribes at both), each crashing and cut off from nodes on its own.")
    var brokerPair = false

    @Option(help: "Sites, each with a broker of its own (2 or more), the first the others' upstream; nodes spread over them. Site links are cut and heal; any site's broker crashes. Implies --broker.")
    var sites = 0

    @Flag(help: "No continuation streams (they are drawn apart: a seed's other events are the same either way).")
    var noStreams = false

    @Flag(help: "No graceful departures (a node shutting down, withdrawing its activities, and coming back).")
    var noDepartures = false

    @Flag(help: "The hostile node also publishes presences of made-up nodes under its own key, listing made-up activities, every 100-300 ms; prints what they cost (snapshot rounds, origins asked to advertise again).")
    var madeUpPresences = false

    @Flag(help: "Brokers without their last-value cache (handoff broker --no-cache; at --sites, the hub's: a broker that joins an upstream keeps its cache), which ask their publishers for what their subscribers follow and answer snapshots empty. (Every --broker and --broker-pair run prints the messages the publishers sent the brokers that no subscriber followed.)")
    var noCache = false

    @Option(help: "Messages per slice of a node's pass over many activities and of its snapshot answers (default: the production 1,000, which no simulated node reaches); 1 or more.")
    var slice: Int?

    @Flag(help: "A quarter of the activities nodes make current come in batches of 2-12 made current in one call (Node.becomeCurrent([...])); with --slice, past their first slice they go out in slices.")
    var batches = false

    @Option(help: "Snapshots a node asks for at once, the others in turn (default: the production 32, which no simulated node reaches); 1 or more.")
    var snapshotsAtOnce: Int?

    @Option(help: "Seconds each node's wall clock may be off true time, drawn within ± this for each node (two clocks differ by up to twice this); 0: every clock true. The nodes' replay window is 30 s.")
    var clockSkew: Double = 0

    mutating func run() throws {
        // A test or script that starts it and is killed leaves no simulation running.
        ParentWatch.exitWithParentIfAsked()
        HandoffSim.requireDeterministicHashing()
        var options = SimulationOptions()
        options.nodes = nodes
        options.duration = .seconds(seconds)
        options.faults = !noFaults
        guard sites == 0 || (sites >= 2 && !brokerPair) else {
            throw ValidationError("--sites takes 2 or more, and not with --broker-pair")
        }
        options.broker = broker || brokerPair || sites > 1
        options.brokerPair = brokerPair
        options.sites = sites
        options.streams = !noStreams
        options.departures = !noDepartures
        if let slice, slice < 1 { throw ValidationError("--slice takes 1 or more") }
        options.sliceSize = slice
        options.batches = batches
        if let snapshotsAtOnce, snapshotsAtOnce < 1 { throw ValidationError("--snapshots-at-once takes 1 or more") }
        options.snapshotsAtOnce = snapshotsAtOnce
        options.madeUpPresences = madeUpPresences
        guard !noCache || options.broker else {
            throw ValidationError("--no-cache takes --broker, --broker-pair or --sites")
        }
        options.lastValueCache = !noCache
        guard clockSkew >= 0, clockSkew <= 3_600 else { throw ValidationError("--clock-skew takes 0 to 3600 seconds") }
        options.clockSkew = .milliseconds(Int64((clockSkew * 1_000).rounded()))
        if let seed {
            let report = Simulation.run(seed: seed, options: options, trace: trace)
            for line in report.trace { print(line) }
            print(summary(report))
            if report.failure != nil { throw ExitCode(1) }
            return
        }
        let start = first ?? UInt64.random(in: 0..<1_000_000_000)
        print("seeds \(start)..<\(start + UInt64(seeds)), \(nodes) nodes, \(seconds) s each\(sites > 1 ? ", at \(sites) sites" : brokerPair ? ", through a broker pair" : broker ? ", through a broker" : "")\(noFaults ? ", no faults" : "")\(noStreams ? ", no streams" : "")\(noDepartures ? ", no departures" : "")\(madeUpPresences ? ", made-up presences" : "")\(noCache ? ", no cache" : "")\(clockSkew > 0 ? ", clocks within ±\(clockSkew) s" : "")")
        var failed: [SimulationReport] = []
        var steps = 0, deliveries = 0, refused = 0, continuations = 0, streams = 0, whole = 0, liesCaught = 0, stalled = 0
        var madeUp = 0, rounds = 0, originsAsked = 0, everyoneAsked = 0, unfollowed = 0
        let clock = ContinuousClock.now
        for seed in start..<(start + UInt64(seeds)) {
            let report = Simulation.run(seed: seed, options: options)
            steps += report.steps
            deliveries += report.deliveries
            refused += report.refused
            continuations += report.continuations
            streams += report.streams
            whole += report.streamsWhole
            liesCaught += report.streamLiesCaught
            stalled += report.streamsStalled
            madeUp += report.madeUpPresences
            rounds += report.snapshotRounds
            originsAsked += report.originsAsked
            everyoneAsked += report.everyoneAsked
            unfollowed += report.unfollowedAtBrokers
            if let failure = report.failure {
                print("seed \(seed) FAILED: \(failure)")
                failed.append(report)
            }
        }
        let elapsed = ContinuousClock.now - clock
        print("snapshot rounds \(rounds), origins asked to advertise again \(originsAsked), everyone asked \(everyoneAsked)\(madeUpPresences ? ", made-up presences \(madeUp)" : "")")
        if options.broker && sites < 2 { print("messages the brokers took that no subscriber followed \(unfollowed)") }
        print("\(seeds) seeds, \(failed.count) failed (\(steps) steps, \(deliveries) messages delivered, \(continuations) continuations, \(streams) streams (\(whole) read whole, \(liesCaught) lies caught, \(stalled) stuck given up on), \(refused) refused as forged, replayed or stale; \(elapsed.formatted(.units(allowed: [.seconds, .milliseconds], width: .narrow))))")
        if let first = failed.first {
            let shortest = Simulation.shorten(first, options: options)
            print("the shortest schedule found for seed \(first.seed) keeps \(shortest.entries - shortest.skipped.count) of \(shortest.entries) entries; its trace:")
            for line in Simulation.run(seed: first.seed, options: options, trace: true, skipping: shortest.skipped).trace.suffix(80) { print("  " + line) }
            print("replay: handoff-sim --seed \(first.seed) --trace\(nodes != 6 ? " --nodes \(nodes)" : "")\(seconds != 60 ? " --seconds \(seconds)" : "")\(noFaults ? " --no-faults" : "")\(sites > 1 ? " --sites \(sites)" : brokerPair ? " --broker-pair" : broker ? " --broker" : "")\(noStreams ? " --no-streams" : "")\(noDepartures ? " --no-departures" : "")\(slice.map { " --slice \($0)" } ?? "")\(batches ? " --batches" : "")\(snapshotsAtOnce.map { " --snapshots-at-once \($0)" } ?? "")\(madeUpPresences ? " --made-up-presences" : "")\(noCache ? " --no-cache" : "")\(clockSkew > 0 ? " --clock-skew \(clockSkew)" : "")")
            throw ExitCode(1)
        }
    }

    func summary(_ report: SimulationReport) -> String {
        let outcome = report.failure.map { "FAILED: \($0)" } ?? "passed"
        return "seed \(report.seed): \(outcome) (\(report.steps) steps, \(report.deliveries) messages, \(report.activities) activities, \(report.continuations) continuations, \(report.streams) streams (\(report.streamsWhole) read whole, \(report.streamLiesCaught) lies caught, \(report.streamsStalled) stuck given up on), \(report.refused) refused; \(report.snapshotRounds) snapshot rounds, \(report.originsAsked) origins and everyone \(report.everyoneAsked) times asked to advertise again\(report.madeUpPresences > 0 ? ", \(report.madeUpPresences) made-up presences" : ""))"
    }

    /// Dictionaries iterate in an order seeded per process unless SWIFT_DETERMINISTIC_HASHING is
    /// set, and the machines iterate some: without it a seed would not replay. The process starts
    /// itself again with it set.
    static func requireDeterministicHashing() {
        guard getenv("SWIFT_DETERMINISTIC_HASHING") == nil else { return }
        setenv("SWIFT_DETERMINISTIC_HASHING", "1", 1)
        let arguments = CommandLine.arguments.map { strdup($0) } + [nil]
        execv("/proc/self/exe", arguments)
        fatalError("could not start again with SWIFT_DETERMINISTIC_HASHING=1: \(String(cString: strerror(errno)))")
    }
}
