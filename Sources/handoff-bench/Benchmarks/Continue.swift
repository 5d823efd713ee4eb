import CPeerBaselines
import CRawBaselines
import Foundation
import Handoff
import ZeroMQ

/// One node of a benchmark pair: direct mode on loopback, dialling `peers`, advertising every 10 s.
func pairConfiguration(_ name: String, peers: [String], lease: Duration = .seconds(30)) -> Node.Configuration {
    var configuration = Node.Configuration(name: name, bus: .direct(listen: "tcp://127.0.0.1:*", peers: peers), advertiseInterval: .seconds(10))
    configuration.lease = lease
    if let polling = benchReplyPolling() { configuration.replyPolling = polling }
    return configuration
}

/// Where `handoff-bench continue --reply-polling` passes its value to every process of the run.
let benchReplyPollingVariable = "HANDOFF_BENCH_REPLY_POLLING_US"

/// The reply polling a benchmark node is given (`continue --reply-polling`), or nil: the default.
func benchReplyPolling() -> Duration? {
    ProcessInfo.processInfo.environment[benchReplyPollingVariable].flatMap(Int.init).map { .microseconds($0) }
}

/// Two direct-mode nodes sharing one context (as the raw baselines share one), running for `body`.
func withPair<T: Sendable>(
    lease: Duration = .seconds(30),
    _ body: (_ originator: Node, _ continuer: Node) async throws -> T
) async throws -> T {
    try await withPair(configured: { pairConfiguration($0, peers: $1, lease: lease) }, body)
}

/// The same, each node configured by `configuration(name, peers)`.
func withPair<T: Sendable>(
    configured configuration: (_ name: String, _ peers: [String]) -> Node.Configuration,
    _ body: (_ originator: Node, _ continuer: Node) async throws -> T
) async throws -> T {
    let context = try Context()
    let originator = try Node(configuration: configuration("originator", []), context: context)
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await originator.run() }
        defer { group.cancelAll() }
        await originator.untilRunning()
        return try await Node.withRunning(configuration("continuer", [originator.busEndpoint!]), context: context) { continuer in
            try await body(originator, continuer)
        }
    }
}

func waitFor(_ id: String, on node: Node) async throws -> DiscoveredActivity {
    while true {
        if let found = await node.activities().first(where: { $0.id == id }) { return found }
        try await Task.sleep(for: .milliseconds(1))
    }
}

/// Continue round trips with both nodes in one process (one context, the process's loops), after
/// 200 of warm-up.
func continueInOneProcess(rounds: Int) async throws -> TimedContinues {
    try await withPair { originator, continuer in
        let activity = try UserActivity(activityType: "org.handoff.contacts.edit-contact")
        activity.userInfo = benchContactInfo
        try await activity.becomeCurrent(on: originator)
        await continuer.setContinuationHandler(forType: activity.activityType) { _ in }
        return try await timedContinues(of: try await waitFor(activity.id, on: continuer), by: continuer, rounds: rounds)
    }
}

/// Measured continues: each one's latency, and what this process's threads ran meanwhile.
struct TimedContinues {
    /// Microseconds, in the order they ran.
    var latencies: [Double]
    /// CPU microseconds per round trip by thread name (this process's), the busiest first.
    var cpuPerRoundTrip: [(thread: String, microseconds: Double)]

    /// `name µs …` for each thread, as the roles report it.
    var cpuSummary: String {
        cpuPerRoundTrip.map { String(format: "%@ %.2f", $0.thread, $0.microseconds) }.joined(separator: " ")
    }

    /// Says `DONE p50 p99` in microseconds, then `CPU` and each thread's microseconds per round
    /// trip: what a role reports to the benchmark that started it (``RoundTrips``).
    func report() {
        tell(String(format: "DONE %.1f %.1f", percentile(latencies, 0.5), percentile(latencies, 0.99)))
        tell("CPU " + cpuSummary)
    }
}

/// `rounds` continues of `activity` by `node` after 200 of warm-up.
func timedContinues(of activity: DiscoveredActivity, by node: Node, rounds: Int) async throws -> TimedContinues {
    try await timedRoundTrips(rounds) { _ = try await node.continueActivity(activity) }
}

/// `rounds` round trips after 200 of warm-up: each one's latency, and this process's CPU by thread.
func timedRoundTrips(_ rounds: Int, _ roundTrip: () async throws -> Void) async throws -> TimedContinues {
    for _ in 0..<200 { try await roundTrip() }
    var latencies: [Double] = []
    latencies.reserveCapacity(rounds)
    let before = cpuByThreadName()
    MeasuredSpan.begin()
    for _ in 0..<rounds {
        let started = ContinuousClock.now
        try await roundTrip()
        latencies.append(seconds(ContinuousClock.now - started) * 1e6)
    }
    MeasuredSpan.end()
    return TimedContinues(latencies: latencies, cpuPerRoundTrip: cpuPerUnit(from: before, to: cpuByThreadName(), count: rounds))
}

/// Continue round trips (request → restore handler called with the full state) against raw REQ/REP.
func benchContinue(rounds: Int) async throws {
    let handoffRun = try await continueInOneProcess(rounds: rounds)
    let handoff = handoffRun.latencies
    var raw = [Double](repeating: 0, count: rounds)
    guard raw_req_rep(Int32(rounds), 256, &raw) == 0 else { throw HandoffError(.handoffFailed, "raw REQ/REP failed") }
    // Each end in a process of its own (its own context, I/O thread and readiness thread), as
    // deployments run: three runs of each, interleaved, and the median of their p50s.
    /// Three runs each, interleaved: raw; the floor of this package's transport in each of its
    /// modes (ContinueFloorProcesses); Handoff.
    func interleaved(_ placement: Placement) throws -> (raw: [RoundTrips], floor: [FloorMode: [RoundTrips]], handoff: [RoundTrips]) {
        var raw: [RoundTrips] = [], floor: [FloorMode: [RoundTrips]] = [:], handoff: [RoundTrips] = []
        for _ in 0..<3 {
            raw.append(try rawRequestReplyBetweenProcesses(rounds: rounds, placement: placement))
            for mode in FloorMode.allCases { floor[mode, default: []].append(try continueFloorBetweenProcesses(rounds: rounds, mode, placement: placement)) }
            handoff.append(try continueBetweenProcesses(rounds: rounds, placement: placement))
        }
        return (raw, floor, handoff)
    }
    /// The floor's rows and the parts of the gap, for one placement.
    func floorRows(_ floor: [FloorMode: [RoundTrips]], raw: Double, handoff: Double, placement: String) {
        let p50 = { (mode: FloorMode) in median(floor[mode, default: []].map(\.p50)) }
        let runs = { (mode: FloorMode) in floor[mode, default: []].map { String(format: "%.0f/%.0f", $0.p50, $0.p99) }.joined(separator: " ") }
        row("floor: the ZeroMQ module on the loops\(placement)", String(format: "%.0f", p50(.bare)), "p50/p99 of 3 runs: " + runs(.bare))
        row("floor, asked from an actor as a node asks", String(format: "%.0f", p50(.actor)), "p50/p99 of 3 runs: " + runs(.actor))
        row("floor, with the envelopes' codec", String(format: "%.0f", p50(.codec)), "p50/p99 of 3 runs: " + runs(.codec))
        row("µs over raw: floor; actor; codec; the rest", String(format: "%.0f; %.0f; %.0f; %.0f", p50(.bare) - raw, p50(.actor) - p50(.bare),
                                                                p50(.codec) - p50(.bare), handoff - p50(.codec) - (p50(.actor) - p50(.bare))))
    }
    let (rawApart, floorApart, handoffApart) = try interleaved(.free)
    print("Continue round trip (request → restore handler with the full activity), \(rounds) rounds, tcp://127.0.0.1")
    let polling = pairConfiguration("default", peers: []).replyPolling
    print("reply polling: " + (polling > .zero ? "\(Int(polling / .microseconds(1))) µs" : "off") + (benchReplyPolling() == nil ? " (the node's default)" : " (--reply-polling)"))
    row("", "p50 µs", "p99 µs")
    row("raw libzmq REQ/REP, 256 B (C)", String(format: "%.0f", percentile(raw, 0.5)), String(format: "%.0f", percentile(raw, 0.99)))
    row("Handoff continueActivity", String(format: "%.0f", percentile(handoff, 0.5)), String(format: "%.0f", percentile(handoff, 0.99)))
    let ratio = percentile(handoff, 0.5) / percentile(raw, 0.5)
    row("ratio Handoff / raw (p50)", String(format: "%.2f x", ratio))
    let rawApartP50 = median(rawApart.map(\.p50)), handoffApartP50 = median(handoffApart.map(\.p50))
    let apartRuns = { (runs: [RoundTrips]) in runs.map { String(format: "%.0f/%.0f", $0.p50, $0.p99) }.joined(separator: " ") }
    row("raw REQ/REP between two processes", String(format: "%.0f", rawApartP50), "p50/p99 of 3 runs: " + apartRuns(rawApart))
    row("Handoff between two processes", String(format: "%.0f", handoffApartP50), "p50/p99 of 3 runs: " + apartRuns(handoffApart))
    let apartRatio = handoffApartP50 / rawApartP50
    row("ratio Handoff / raw, between processes (p50)", String(format: "%.2f x", apartRatio))
    // What of the gap is the transport as this package drives it, asking as a node does, the
    // codec, and the rest of the node's work.
    floorRows(floorApart, raw: rawApartP50, handoff: handoffApartP50, placement: "")
    let hot = try continueCodecHotCosts()
    row("codec hot, the four steps together (µs)", String(format: "%.1f", hot.reduce(0) { $0 + $1.microseconds }),
        String(format: "request enc/dec %.1f/%.1f, reply enc/dec %.1f/%.1f", hot[0].microseconds, hot[1].microseconds, hot[2].microseconds, hot[3].microseconds))
    // What the asking process spends per round trip: the continuer's loop polls for its reply
    // (EventLoops.awaitReply), where a raw REQ sleeps in zmq_recv.
    let rawAskerCPU = median(rawApart.map(\.askerCPU)), handoffAskerCPU = median(handoffApart.map(\.askerCPU))
    let cpuRuns = { (runs: [RoundTrips]) in runs.map { String(format: "%.0f", $0.askerCPU) }.joined(separator: " ") }
    row("CPU per round trip, raw REQ process (µs)", String(format: "%.0f", rawAskerCPU), "3 runs: " + cpuRuns(rawApart))
    row("CPU per round trip, floor's asker (µs)", String(format: "%.0f", median(floorApart[.bare, default: []].map(\.askerCPU))), "3 runs: " + cpuRuns(floorApart[.bare, default: []]))
    row("CPU per round trip, Handoff continuer (µs)", String(format: "%.0f", handoffAskerCPU), "3 runs: " + cpuRuns(handoffApart))
    compare("continue round trip p50 / p99 (µs)", handoff: String(format: "%.0f / %.0f", percentile(handoff, 0.5), percentile(handoff, 0.99)),
            baseline: "raw libzmq REQ/REP", String(format: "%.0f / %.0f", percentile(raw, 0.5), percentile(raw, 0.99)),
            ratio: String(format: "%.2f x", ratio), target: "≤ 1.5 x", met: ratio <= 1.5)
    compare("continue between processes, p50 (µs)", handoff: String(format: "%.0f", handoffApartP50),
            baseline: "raw REQ/REP, two processes", String(format: "%.0f", rawApartP50),
            ratio: String(format: "%.2f x", apartRatio), target: "≤ 1.5 x", met: apartRatio <= 1.5)
    compare("CPU per continue, asking process (µs)", handoff: String(format: "%.0f", handoffAskerCPU),
            baseline: "raw REQ process", String(format: "%.0f", rawAskerCPU),
            ratio: String(format: "%.2f x", handoffAskerCPU / rawAskerCPU))
    // The same with each process held to one CPU: what the scheduler's placement costs each side.
    guard Placement.canPin else { return }
    let (rawPinned, floorPinned, handoffPinned) = try interleaved(.onePerProcess)
    let rawPinnedP50 = median(rawPinned.map(\.p50)), handoffPinnedP50 = median(handoffPinned.map(\.p50))
    row("raw REQ/REP, each process on one CPU", String(format: "%.0f", rawPinnedP50), "p50/p99 of 3 runs: " + apartRuns(rawPinned))
    row("Handoff, each process on one CPU", String(format: "%.0f", handoffPinnedP50), "p50/p99 of 3 runs: " + apartRuns(handoffPinned))
    row("ratio Handoff / raw, each process on one CPU (p50)", String(format: "%.2f x", handoffPinnedP50 / rawPinnedP50))
    floorRows(floorPinned, raw: rawPinnedP50, handoff: handoffPinnedP50, placement: " (pinned)")
    compare("the same, each process on one CPU (µs)", handoff: String(format: "%.0f", handoffPinnedP50),
            baseline: "raw REQ/REP, each on one CPU", String(format: "%.0f", rawPinnedP50),
            ratio: String(format: "%.2f x", handoffPinnedP50 / rawPinnedP50))
}
