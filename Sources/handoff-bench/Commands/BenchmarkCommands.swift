import ArgumentParser
import Foundation
import Handoff

// One command per benchmark (Benchmarks/), each with its own options and defaults.

/// `--size`, `--runs`, `--window`, `--only` of the stream benchmarks.
struct StreamOptions: ParsableArguments {
    @Option(help: "MiB per transfer.") var size = 256
    @Option(help: "Transfers of each kind (the median is reported).") var runs = 21
    @Option(help: "Chunks in flight (the reader's credit).") var window = 16
    @Option(help: ArgumentHelp("`handoff` or `raw`: one side alone (for profiling); `processes`: only between two processes.", valueName: "side"))
    var only: String?
    @Option(help: "The checksum the Handoff streams end with: crc32c (the default), xxh64 or sha256.")
    var checksum: StreamChecksum = .crc32c

    var options: Options { Options(sizeMiB: size, runs: runs, window: window, only: only, checksum: checksum) }
}

extension StreamChecksum: ExpressibleByArgument {}

struct AllBenchmarks: Benchmark {
    static let configuration = CommandConfiguration(commandName: "all", abstract: "Advertisements, continue, streams and a late joiner, in one run (scripts/bench).")
    @OptionGroup var common: CommonOptions
    @Option(help: "Advertisements per trial.") var count = 20_000
    @Option(help: "Trials of the advertisements.") var trials = 3
    @Option(help: "Continue round trips.") var rounds = 5_000
    @OptionGroup var streams: StreamOptions
    @Option(help: "Activities the late joiner sees.") var activities = 1_000
    func validate() throws { try validateAdvertCount(count) }

    func measure() async throws {
        let started = ContinuousClock.now
        try await benchAdverts(count: count, trials: trials)
        print("")
        try await benchContinue(rounds: rounds)
        print("")
        try await benchStreams(streams.options)
        print("")
        try await benchLateJoiner(count: activities)
        print(String(format: "\nwhole run: %.0f s", seconds(ContinuousClock.now - started)))
    }
}

/// A Handoff trial makes `count` activities current at once. Past the publishing node's PUB queue
/// (100,000 messages, Node.swift) a burst that outruns its follower is dropped there, and comes
/// back only with the next refresh, itself a burst (docs/performance.md, "Why `adverts --count
/// 200000` never finished"): the trial would wait that long, or for ever.
func validateAdvertCount(_ count: Int) throws {
    guard (1...100_000).contains(count) else {
        throw ValidationError("--count must be 1 to 100,000: the publishing node's PUB queue holds 100,000 messages, and a burst past it is dropped until the next refresh")
    }
}

struct AdvertsBenchmark: Benchmark {
    static let configuration = CommandConfiguration(commandName: "adverts", abstract: "Advertisements through the broker vs raw libzmq, NATS, Redis.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Advertisements per trial.") var count = 20_000
    @Option(help: "Trials of each side, interleaved.") var trials = 3
    @Flag(help: "Only what CURVE costs: Handoff's trial with every party secure, against the same without.") var curve = false
    func validate() throws { try validateAdvertCount(count) }
    func measure() async throws {
        if curve { try await benchAdvertsCurve(count: count, trials: trials) } else { try await benchAdverts(count: count, trials: trials) }
    }
}

struct AdvertFloorBenchmark: Benchmark {
    static let configuration = CommandConfiguration(commandName: "advert-floor", abstract: "What an advertisement costs at the least, against the target's budget.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Advertisements per trial.") var count = 100_000
    @Option(help: "Trials.") var trials = 5
    func measure() async throws { try await benchAdvertFloor(count: count, trials: trials) }
}

struct ContinueBenchmark: Benchmark {
    static let configuration = CommandConfiguration(commandName: "continue", abstract: "Continue round trips vs raw REQ/REP, in one process and between two.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Round trips per run.") var rounds = 5_000
    @Option(name: .customLong("reply-polling"), help: ArgumentHelp(
        "How long a continuing node's loop polls for the reply it awaits, in microseconds (Node.Configuration.replyPolling; 0: never, the loop sleeps), in every process of the run. Default: the node's own default.",
        valueName: "µs"))
    var replyPolling: Int?
    func validate() throws {
        guard (replyPolling ?? 0) >= 0 else { throw ValidationError("--reply-polling takes microseconds, 0 or more") }
    }
    func measure() async throws {
        // The children (the continuing and answering processes) read it as this process does.
        if let replyPolling { setenv(benchReplyPollingVariable, "\(replyPolling)", 1) }
        try await benchContinue(rounds: rounds)
    }
}

struct StreamsBenchmark: Benchmark {
    static let configuration = CommandConfiguration(commandName: "streams", abstract: "Streams vs raw DEALER/ROUTER, TCP, NATS, Redis; peak memory.")
    @OptionGroup var common: CommonOptions
    @OptionGroup var streams: StreamOptions
    func measure() async throws { try await benchStreams(streams.options) }
}

struct LateJoinerBenchmark: Benchmark {
    static let configuration = CommandConfiguration(commandName: "late-joiner", abstract: "A new node's time to see N current activities.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Current activities.") var count = 1_000
    func measure() async throws { try await benchLateJoiner(count: count) }
}

struct ChecksumBenchmark: Benchmark {
    static let configuration = CommandConfiguration(commandName: "checksum", abstract: "CRC-32C per implementation, XXH64 and SHA-256, against memcpy.")
    @OptionGroup var common: CommonOptions
    @Option(name: .customLong("chunk-kib"), help: "KiB per call.") var chunkKiB = 256
    @Option(name: .customLong("mib"), help: "MiB checksummed per implementation.") var mebibytes = 4_096
    func measure() async throws { benchChecksum(chunkKiB: chunkKiB, mebibytes: mebibytes) }
}

struct BecomeCurrentBenchmark: Benchmark {
    static let configuration = CommandConfiguration(commandName: "become-current", abstract: "becomeCurrent alone, on an idle node.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Activities made current one after another.") var count = 50_000
    func measure() async throws { try await benchBecomeCurrent(count: count) }
}

struct SlowReaderBenchmark: Benchmark {
    static let configuration = CommandConfiguration(commandName: "slow-reader", abstract: "A stream whose reader is slow: it outlasts every timeout.")
    @OptionGroup var common: CommonOptions
    @Option(help: "MiB to transfer.") var size = 16
    @Option(help: "How long the slow reader takes, about.") var seconds = 65
    @Option(help: "Chunks in flight (the reader's credit).") var window = 16
    func measure() async throws {
        try benchSlowReader(options: Options(sizeMiB: size, window: window), seconds: .seconds(seconds))
    }
}

struct HostileBenchmark: Benchmark {
    static let configuration = CommandConfiguration(commandName: "hostile", abstract: "An agent's memory, threads and service under hostile peers.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Contacts the flooding peer advertises.") var contacts = 20_000
    @Option(help: "Stream opens the hostile peer leaves unread.") var streams = 600
    @Option(name: .customLong("push-mib"), help: "MiB pushed at the agent's sockets.") var pushMiB = 512
    @Option(help: "DEALER connections that never speak.") var dealers = 2_000
    func measure() async throws { try await benchHostile(contacts: contacts, streams: streams, pushMiB: pushMiB, dealers: dealers) }
}

struct StallBenchmark: Benchmark {
    static let configuration = CommandConfiguration(commandName: "stall", abstract: "How soon an agent's stall timeout frees pairs that peers keep alive and never read.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Pairs kept alive and never read, each from a node id of its own.") var pairs = 32
    @Option(name: .customLong("stall-timeout"), help: "The agent's --stream-stall-timeout, in seconds.") var stallTimeout = 2.0
    @Option(help: "Contacts in the agent's list (the default fits one chunk).") var contacts = 100
    func measure() async throws { try await benchStall(pairs: pairs, stallSeconds: stallTimeout, contacts: contacts) }
}

struct ChurnBenchmark: Benchmark {
    static let configuration = CommandConfiguration(commandName: "churn", abstract: "An agent's memory under a peer that opens and fails pairs one after another.")
    @OptionGroup var common: CommonOptions
    @Option(help: "How long the peer churns, in seconds.") var seconds = 10.0
    @Option(help: "Contacts in the agent's list (the default fits one chunk).") var contacts = 100
    func measure() async throws { try await benchChurn(contacts: contacts, duration: .milliseconds(Int(seconds * 1000))) }
}

struct FuzzMemoryBenchmark: Benchmark {
    static let configuration = CommandConfiguration(commandName: "fuzz-memory", abstract: "An agent's memory over identical rounds of fuzzed input.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Fuzzed inputs per round.") var inputs = 100_000
    @Option(help: "Rounds.") var rounds = 3
    func measure() async throws { try benchFuzzMemory(inputs: inputs, rounds: rounds) }
}

struct SubscriptionFloodBenchmark: Benchmark {
    static let configuration = CommandConfiguration(
        commandName: "subscription-flood", abstract: "A broker's memory under a member flooding its backend with distinct subscriptions, against the same broker unbounded.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Distinct subscriptions sent.") var count = 500_000
    @Option(help: "Bytes of each subscription's topic.") var length = 60
    func measure() async throws { try benchSubscriptionFlood(count: count, length: length) }
}

struct BrokerCapacityBenchmark: Benchmark {
    static let configuration = CommandConfiguration(
        commandName: "broker-capacity", abstract: "What one broker forwards on one CPU, against a raw zmq_proxy; its floor; its memory per cached activity.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Advertisements in the flood.") var count = 50_000
    @Option(help: "Nodes they come from.") var origins = 500
    @Option(help: "Trials of each, interleaved.") var trials = 3
    @Option(help: ArgumentHelp("Subscriber counts, comma-separated.", valueName: "n,n")) var subscribers = "1,4"
    @Option(name: .customLong("memory-activities"), help: "Activities cached for the memory figure (0: skip it).") var memoryActivities = 100_000
    @Option(name: .customLong("memory-origins"), help: "Nodes they come from.") var memoryOrigins = 1_000
    @Flag(help: "Every connection over CURVE: the broker with its key and account, checking every sender; the raw proxy a CURVE server that takes any client.")
    var curve = false

    func validate() throws {
        guard !subscribers.split(separator: ",").isEmpty, subscribers.split(separator: ",").allSatisfy({ Int($0).map { $0 > 0 } ?? false }) else {
            throw ValidationError("--subscribers takes counts above 0, comma-separated: 1,4")
        }
    }

    func measure() async throws {
        try benchBrokerCapacity(
            count: count, origins: origins, trials: trials, fanouts: subscribers.split(separator: ",").compactMap { Int($0) },
            memoryCount: memoryActivities, memoryOrigins: memoryOrigins, curve: curve)
    }
}

struct LivePageBenchmark: Benchmark {
    static let configuration = CommandConfiguration(
        commandName: "live-page", abstract: "What the live page costs a broker: --live-page off, on with nobody looking, and watched.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Advertisements in the flood.") var count = 50_000
    @Option(help: "Nodes they come from.") var origins = 500
    @Option(help: "Trials of each, interleaved.") var trials = 5

    func measure() async throws {
        try benchLivePageCost(count: count, origins: origins, trials: trials)
    }
}

struct FleetBenchmark: Benchmark {
    static let configuration = CommandConfiguration(
        commandName: "fleet", abstract: "Simulated nodes joining a real broker one after another, a flood from one node, and a fleet at rest.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Nodes joining one after another.") var joiners = 1_000
    @Option(help: "Activities current while they join.") var activities = 10_000
    @Option(help: "Advertisements in one node's flood.") var flood = 10_000
    @Option(help: "Nodes of the fleet at rest.") var nodes = 2_000
    @Option(name: .customLong("per-node"), help: "Activities per node at rest.") var perNode = 5
    @Option(name: .customLong("steady-seconds"), help: "How long the fleet rests.") var steadySeconds = 10
    @Flag(help: "The fleet at rest on a broker pair: every node publishes to both brokers, the real node follows both.") var pair = false
    @Option(help: "Only the fleet across this many sites (a broker each, joined to a hub), the nodes spread over them; 0: one broker (or a pair).")
    var sites = 0
    @Flag(help: "Across sites: the nodes advertise, then stay silent past their lease before keeping them alive, so that every broker forgets them and asks them to advertise again.")
    var lapse = false

    func measure() async throws {
        if sites > 0 {
            try benchFleetSites(nodes: nodes, perNode: perNode, sites: sites, steadySeconds: Double(steadySeconds), lapse: lapse)
            return
        }
        try benchFleet(joiners: joiners, activities: activities, flood: flood)
        try benchFleetSteady(nodes: nodes, perNode: perNode, steadySeconds: Double(steadySeconds), pair: pair)
    }
}
