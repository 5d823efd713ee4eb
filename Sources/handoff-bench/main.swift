// handoff-bench: Handoff measured against raw libzmq doing the same work in the same run, and against
// the peers a user would pick instead (NATS, Redis, a plain TCP socket), started here on loopback.
// Build and run in release: `scripts/bench` (everything), or
// `swift run -c release handoff-bench all|adverts|continue|streams|late-joiner [options]`.

import CPeerBaselines
import CRawBaselines
import Foundation
import HandoffExecutor
import Handoff
import Logging
import ZeroMQ

/// Every comparison made in this run, for the closing table.
struct Comparison {
    var what: String
    var handoff: String
    var baseline: String
    var baselineValue: String
    var ratio: String
    var target: String
    /// Whether the target was reached; `nil` when there is no target.
    var met: Bool?
}

nonisolated(unsafe) var comparisons: [Comparison] = []

func compare(_ what: String, handoff: String, baseline: String, _ baselineValue: String, ratio: String, target: String = "", met: Bool? = nil) {
    comparisons.append(Comparison(what: what, handoff: handoff, baseline: baseline, baselineValue: baselineValue, ratio: ratio, target: target, met: met))
}

func printSummary() {
    guard !comparisons.isEmpty else { return }
    print("")
    print("Summary (Handoff against each baseline, same machine, same run)")
    let header = ["measurement", "Handoff", "baseline", "baseline's", "ratio", "target", ""]
    let rows = [header] + comparisons.map { c in
        [c.what, c.handoff, c.baseline, c.baselineValue, c.ratio, c.target, c.met.map { $0 ? "met" : "NOT met" } ?? ""]
    }
    let widths = (0..<header.count).map { column in rows.map { $0[column].count }.max() ?? 0 }
    for (index, row) in rows.enumerated() {
        print(zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  "))
        if index == 0 { print(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")) }
    }
}

struct Options {
    var sizeMiB = 256
    /// Streams of 256 MiB take about 0.1 s here: enough runs that the median holds still.
    var runs = 21
    var chunk = 256 * 1024
    var window = 16
    /// `handoff` or `raw` to measure one side only (for profiling), or `processes` for the streams'
    /// comparison between two processes alone; everything by default.
    var only: String?

    init(_ arguments: [String]) {
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "--size": sizeMiB = Int(iterator.next() ?? "") ?? sizeMiB
            case "--runs": runs = Int(iterator.next() ?? "") ?? runs
            case "--window": window = Int(iterator.next() ?? "") ?? window
            case "--only": only = iterator.next()
            default: break
            }
        }
    }
}

/// Writes `total` bytes to every stream opened to the activity, from one reused buffer.
final class Writer: UserActivityDelegate {
    let total: Int
    let buffer: [UInt8]
    init(total: Int, chunk: Int) {
        self.total = total
        buffer = [UInt8](repeating: 0x5A, count: chunk * 8)
    }

    func userActivity(_ activity: UserActivity, didReceive streams: ContinuationStreams) async {
        streams.output.expectedLength = UInt64(total)
        var written = 0
        do {
            while written < total {
                let count = min(buffer.count, total - written)
                try await streams.output.write(buffer[0..<count])
                written += count
            }
            try await streams.output.finish()
        } catch {
            print("writer failed: \(error)")
        }
    }
}

/// One Handoff stream of `total` bytes between two nodes over loopback; returns seconds.
func handoffStream(total: Int, options: Options) async throws -> Double {
    // One context for both nodes, as the raw baseline uses one for both of its sockets.
    let context = try Context()
    let originator = try Node(configuration: streamConfiguration("originator", peers: [], options: options), context: context)
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await originator.run() }
        defer { group.cancelAll() }
        await originator.untilRunning()
        return try await Node.withRunning(streamConfiguration("continuer", peers: [originator.busEndpoint!], options: options), context: context) { continuer in
            let writer = Writer(total: total, chunk: options.chunk)
            let activity = try UserActivity(activityType: "org.handoff.bench.bulk")
            activity.supportsContinuationStreams = true
            activity.delegate = writer
            try await activity.becomeCurrent(on: originator)
            await continuer.setContinuationHandler(forType: activity.activityType) { _ in }
            var found: DiscoveredActivity?
            while found == nil {
                found = await continuer.activities().first { $0.id == activity.id }
                if found == nil { try await Task.sleep(for: .milliseconds(5)) }
            }
            guard case .restored(let continued) = try await continuer.continueActivity(found!) else { return -1 }
            let started = ContinuousClock.now
            let streams = try await continuer.openStreams(for: continued)
            var received = 0
            for try await chunk in streams.input { received += chunk.count }
            let elapsed = ContinuousClock.now - started
            guard received == total else { throw HandoffError(.streamTruncated, "received \(received) of \(total)") }
            return seconds(elapsed)
        }
    }
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

func row(_ name: String, _ value: String, _ detail: String = "") {
    print(name.padding(toLength: 52, withPad: " ", startingAt: 0) + value.padding(toLength: 14, withPad: " ", startingAt: 0) + detail)
}

func benchStreams(_ options: Options) async throws {
    let total = options.sizeMiB << 20
    if options.only == "processes" {
        print("Streams: \(options.sizeMiB) MiB between two processes, chunk \(options.chunk / 1024) KiB, window \(options.window), \(options.runs) runs each, interleaved; median")
        return try benchStreamsBetweenProcesses(options, runs: options.runs)
    }
    print("Streams: \(options.sizeMiB) MiB over tcp://127.0.0.1 within one process (one libzmq context, one I/O thread, on each side of the comparison), chunk \(options.chunk / 1024) KiB, window \(options.window), \(options.runs) runs each, interleaved; median")
    var raw: [Double] = []
    var handoff: [Double] = []
    _ = try await handoffStream(total: 16 << 20, options: options)  // warm-up
    _ = raw_dealer_router_transfer(UInt64(16 << 20), options.chunk, Int32(options.window))
    for _ in 0..<options.runs {
        if options.only != "handoff" {
            let rawSeconds = raw_dealer_router_transfer(UInt64(total), options.chunk, Int32(options.window))
            guard rawSeconds > 0 else { throw HandoffError(.handoffFailed, "the raw baseline failed") }
            raw.append(rawSeconds)
        }
        if options.only != "raw" {
            handoff.append(try await handoffStream(total: total, options: options))
        }
    }
    guard options.only == nil else {
        for (name, times) in [("raw", raw), ("handoff", handoff)] where !times.isEmpty {
            row(name, String(format: "%.0f MiB/s", Double(options.sizeMiB) / median(times)))
        }
        return
    }
    let rawRate = Double(options.sizeMiB) / median(raw)
    let handoffRate = Double(options.sizeMiB) / median(handoff)
    row("", "MiB/s", "seconds (median; all runs)")
    row("raw libzmq DEALER/ROUTER with credit (C)", String(format: "%.0f", rawRate), String(format: "%.3f; ", median(raw)) + raw.map { String(format: "%.3f", $0) }.joined(separator: " "))
    row("Handoff continuation stream (CRC-32C)", String(format: "%.0f", handoffRate), String(format: "%.3f; ", median(handoff)) + handoff.map { String(format: "%.3f", $0) }.joined(separator: " "))
    row("ratio Handoff / raw", String(format: "%.1f %%", 100 * handoffRate / rawRate))
    compare("stream \(options.sizeMiB) MiB (MiB/s)", handoff: String(format: "%.0f", handoffRate), baseline: "raw libzmq DEALER/ROUTER",
            String(format: "%.0f", rawRate), ratio: String(format: "%.0f %%", 100 * handoffRate / rawRate),
            target: "≥ 90 %", met: handoffRate >= 0.9 * rawRate)

    // The same bytes through a plain TCP socket, NATS and Redis (credit-based like the others).
    let peerRuns = min(options.runs, 3)
    var peers: [(String, Double)] = []
    let tcp = (0..<peerRuns).map { _ in tcp_transfer(UInt64(total), options.chunk) }
    if tcp.allSatisfy({ $0 > 0 }) { peers.append(("plain TCP socket over loopback", median(tcp))) }
    if let nats = PeerServer.start("nats-server") {
        let times = (0..<peerRuns).map { _ in nats_transfer(nats.port, UInt64(total), options.chunk, Int32(options.window)) }
        if times.allSatisfy({ $0 > 0 }) { peers.append(("NATS (nats-server), credit", median(times))) }
        nats.stop()
    }
    if let redis = PeerServer.start("redis-server") {
        let times = (0..<peerRuns).map { _ in redis_transfer(redis.port, UInt64(total), options.chunk, Int32(options.window)) }
        if times.allSatisfy({ $0 > 0 }) { peers.append(("Redis pub/sub (redis-server), credit", median(times))) }
        redis.stop()
    }
    for (name, time) in peers {
        let rate = Double(options.sizeMiB) / time
        row(name, String(format: "%.0f", rate), String(format: "%.3f (median of %d)", time, peerRuns))
        let isPeer = !name.hasPrefix("plain TCP")
        compare("stream \(options.sizeMiB) MiB (MiB/s)", handoff: String(format: "%.0f", handoffRate), baseline: name,
                String(format: "%.0f", rate), ratio: String(format: "%.0f %%", 100 * handoffRate / rate),
                target: isPeer ? "ahead" : "", met: isPeer ? handoffRate > rate : nil)
    }

    // Peak memory of each end, each its own process, at two sizes: bounded, and not growing with size.
    print("Peak resident memory (VmHWM) of each end, each end its own process, chunk \(options.chunk / 1024) KiB, window \(options.window):")
    row("", "MiB/s", "originator / continuer peak")
    var peaks: [(Int, ProcessStreamRun)] = []
    for size in [options.sizeMiB / 4, options.sizeMiB] where size > 0 {
        let run = try streamBetweenProcesses(total: size << 20, options: options)
        peaks.append((size, run))
        row("Handoff, \(size) MiB between two processes", String(format: "%.0f", Double(size) / run.seconds),
            "\(mebibytes(run.originatorPeak)) / \(mebibytes(run.continuerPeak))")
    }
    let rawProcess = try rawStreamInProcess(total: total, options: options)
    row("raw libzmq, \(options.sizeMiB) MiB, both ends in one process", String(format: "%.0f", Double(options.sizeMiB) / rawProcess.seconds),
        "\(mebibytes(rawProcess.peak)) (both ends)")
    if let small = peaks.first, let large = peaks.last, peaks.count == 2 {
        let growth = max(large.1.originatorPeak - small.1.originatorPeak, large.1.continuerPeak - small.1.continuerPeak)
        let bound = 64 << 20
        compare("stream memory, per end (peak RSS)", handoff: "\(mebibytes(large.1.originatorPeak)) / \(mebibytes(large.1.continuerPeak))",
                baseline: "raw libzmq (both ends)", mebibytes(rawProcess.peak),
                ratio: "+\(mebibytes(max(growth, 0))) from \(small.0) to \(large.0) MiB",
                target: "bounded", met: growth < bound / 4 && max(large.1.originatorPeak, large.1.continuerPeak) < bound)
    }
    try benchStreamsBetweenProcesses(options, runs: min(options.runs, 9))
}

/// The figure users see: Handoff between two processes against raw libzmq between two processes,
/// interleaved, same size, chunk and window.
func benchStreamsBetweenProcesses(_ options: Options, runs apartRuns: Int) throws {
    let total = options.sizeMiB << 20
    /// `runs` transfers each, raw and Handoff, interleaved.
    func interleaved(_ runs: Int, _ placement: Placement) throws -> (raw: [ProcessStreamRun], handoff: [ProcessStreamRun]) {
        var raw: [ProcessStreamRun] = [], handoff: [ProcessStreamRun] = []
        for _ in 0..<runs {
            raw.append(try rawStreamBetweenProcesses(total: total, options: options, placement: placement))
            handoff.append(try streamBetweenProcesses(total: total, options: options, placement: placement))
        }
        return (raw, handoff)
    }
    func rate(_ runs: [ProcessStreamRun]) -> Double { Double(options.sizeMiB) / median(runs.map(\.seconds)) }
    func timings(_ runs: [ProcessStreamRun]) -> String { runs.map { String(format: "%.3f", $0.seconds) }.joined(separator: " ") }

    let (rawApart, handoffApart) = try interleaved(apartRuns, .free)
    let rawApartRate = rate(rawApart), handoffApartRate = rate(handoffApart)
    row("raw libzmq, \(options.sizeMiB) MiB between two processes", String(format: "%.0f", rawApartRate),
        "\(mebibytes(rawApart.map(\.originatorPeak).max() ?? 0)) / \(mebibytes(rawApart.map(\.continuerPeak).max() ?? 0)); median of \(apartRuns): " + timings(rawApart))
    row("Handoff, \(options.sizeMiB) MiB between two processes", String(format: "%.0f", handoffApartRate), "median of \(apartRuns), interleaved: " + timings(handoffApart))
    row("ratio Handoff / raw, between processes", String(format: "%.1f %%", 100 * handoffApartRate / rawApartRate))
    compare("stream \(options.sizeMiB) MiB between processes (MiB/s)", handoff: String(format: "%.0f", handoffApartRate),
            baseline: "raw libzmq DEALER/ROUTER, two processes", String(format: "%.0f", rawApartRate),
            ratio: String(format: "%.0f %%", 100 * handoffApartRate / rawApartRate), target: "≥ 90 %", met: handoffApartRate >= 0.9 * rawApartRate)
    // The same with each process held to one CPU: what the scheduler's placement costs each side.
    guard Placement.canPin else { return }
    let pinnedRuns = max(3, min(apartRuns, 5))
    let (rawPinned, handoffPinned) = try interleaved(pinnedRuns, .onePerProcess)
    let rawPinnedRate = rate(rawPinned), handoffPinnedRate = rate(handoffPinned)
    row("raw libzmq, each process on one CPU", String(format: "%.0f", rawPinnedRate), "median of \(pinnedRuns): " + timings(rawPinned))
    row("Handoff, each process on one CPU", String(format: "%.0f", handoffPinnedRate), "median of \(pinnedRuns), interleaved: " + timings(handoffPinned))
    row("ratio Handoff / raw, each process on one CPU", String(format: "%.1f %%", 100 * handoffPinnedRate / rawPinnedRate))
    compare("the same, each process on one CPU (MiB/s)", handoff: String(format: "%.0f", handoffPinnedRate),
            baseline: "raw libzmq, each process on one CPU", String(format: "%.0f", rawPinnedRate),
            ratio: String(format: "%.0f %%", 100 * handoffPinnedRate / rawPinnedRate))
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

/// One node of a benchmark pair: direct mode on loopback, dialling `peers`, advertising every 10 s.
func pairConfiguration(_ name: String, peers: [String], lease: Duration = .seconds(30)) -> Node.Configuration {
    var configuration = Node.Configuration(name: name, bus: .direct(listen: "tcp://127.0.0.1:*", peers: peers), advertiseInterval: .seconds(10))
    configuration.lease = lease
    return configuration
}

/// Two direct-mode nodes sharing one context (as the raw baselines share one), running for `body`.
func withPair<T: Sendable>(
    lease: Duration = .seconds(30),
    _ body: (_ originator: Node, _ continuer: Node) async throws -> T
) async throws -> T {
    let context = try Context()
    let originator = try Node(configuration: pairConfiguration("originator", peers: [], lease: lease), context: context)
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await originator.run() }
        defer { group.cancelAll() }
        await originator.untilRunning()
        return try await Node.withRunning(pairConfiguration("continuer", peers: [originator.busEndpoint!], lease: lease), context: context) { continuer in
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

/// Continue round trips (request → restore handler called with the full state) against raw REQ/REP.
func benchContinue(rounds: Int) async throws {
    let handoff: [Double] = try await withPair { originator, continuer in
        let activity = try UserActivity(activityType: "org.handoff.contacts.edit-contact")
        activity.userInfo = benchContactInfo
        try await activity.becomeCurrent(on: originator)
        await continuer.setContinuationHandler(forType: activity.activityType) { _ in }
        let found = try await waitFor(activity.id, on: continuer)
        for _ in 0..<200 { _ = try await continuer.continueActivity(found) }  // warm-up
        var latencies: [Double] = []
        for _ in 0..<rounds {
            let started = ContinuousClock.now
            _ = try await continuer.continueActivity(found)
            latencies.append(seconds(ContinuousClock.now - started) * 1e6)
        }
        return latencies
    }
    var raw = [Double](repeating: 0, count: rounds)
    guard raw_req_rep(Int32(rounds), 256, &raw) == 0 else { throw HandoffError(.handoffFailed, "raw REQ/REP failed") }
    // Each end in a process of its own (its own context, I/O thread and readiness thread), as
    // deployments run: three runs of each, interleaved, and the median of their p50s.
    /// Three runs each, raw and Handoff, interleaved.
    func interleaved(_ placement: Placement) throws -> (raw: [RoundTrips], handoff: [RoundTrips]) {
        var raw: [RoundTrips] = [], handoff: [RoundTrips] = []
        for _ in 0..<3 {
            raw.append(try rawRequestReplyBetweenProcesses(rounds: rounds, placement: placement))
            handoff.append(try continueBetweenProcesses(rounds: rounds, placement: placement))
        }
        return (raw, handoff)
    }
    let (rawApart, handoffApart) = try interleaved(.free)
    print("Continue round trip (request → restore handler with the full activity), \(rounds) rounds, tcp://127.0.0.1")
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
    compare("continue round trip p50 / p99 (µs)", handoff: String(format: "%.0f / %.0f", percentile(handoff, 0.5), percentile(handoff, 0.99)),
            baseline: "raw libzmq REQ/REP", String(format: "%.0f / %.0f", percentile(raw, 0.5), percentile(raw, 0.99)),
            ratio: String(format: "%.2f x", ratio), target: "≤ 1.5 x", met: ratio <= 1.5)
    compare("continue between processes, p50 (µs)", handoff: String(format: "%.0f", handoffApartP50),
            baseline: "raw REQ/REP, two processes", String(format: "%.0f", rawApartP50),
            ratio: String(format: "%.2f x", apartRatio), target: "≤ 1.5 x", met: apartRatio <= 1.5)
    // The same with each process held to one CPU: what the scheduler's placement costs each side.
    guard Placement.canPin else { return }
    let (rawPinned, handoffPinned) = try interleaved(.onePerProcess)
    let rawPinnedP50 = median(rawPinned.map(\.p50)), handoffPinnedP50 = median(handoffPinned.map(\.p50))
    row("raw REQ/REP, each process on one CPU", String(format: "%.0f", rawPinnedP50), "p50/p99 of 3 runs: " + apartRuns(rawPinned))
    row("Handoff, each process on one CPU", String(format: "%.0f", handoffPinnedP50), "p50/p99 of 3 runs: " + apartRuns(handoffPinned))
    row("ratio Handoff / raw, each process on one CPU (p50)", String(format: "%.2f x", handoffPinnedP50 / rawPinnedP50))
    compare("the same, each process on one CPU (µs)", handoff: String(format: "%.0f", handoffPinnedP50),
            baseline: "raw REQ/REP, each on one CPU", String(format: "%.0f", rawPinnedP50),
            ratio: String(format: "%.2f x", handoffPinnedP50 / rawPinnedP50))
}

/// Advertisements: Handoff activities made current on one node and seen by another, against raw
/// PUB → XSUB/XPUB proxy → SUB, NATS and Redis pub/sub with messages of the same size. Each side runs
/// `trials` times, interleaved; throughput is the median, latencies are pooled.
func benchAdverts(count: Int, trials: Int) async throws {
    var handoffRuns: [Double] = [], handoffLatencies: [Double] = []
    var rawRuns: [Double] = [], rawLatencies: [Double] = [], batchedRuns: [Double] = []
    var handoffCPU: [Double] = [], rawCPU: [Double] = []
    var apart: (handoff: [Double], handoffCPU: [Double], raw: [Double], rawCPU: [Double]) = ([], [], [], [])
    var apartLatencies: (handoff: [Double], raw: [Double]) = ([], [])
    var size = 0
    for _ in 0..<trials {
        batchedRuns.append(try await handoffAdverts(count: count, batch: 1_000).seconds)
        let run = try await handoffAdverts(count: count)
        handoffRuns.append(run.seconds)
        handoffCPU.append(run.cpu)
        handoffLatencies += run.latencies
        size = run.size
        var seconds = 0.0, cpu = 0.0
        var latencies = [Double](repeating: 0, count: 200)
        guard raw_pub_proxy_sub(Int32(count), size, &seconds, &cpu, &latencies, 200) == 0 else { throw HandoffError(.handoffFailed, "raw pub/sub failed") }
        rawRuns.append(seconds)
        rawCPU.append(cpu)
        rawLatencies += latencies
        let handoffApart = try await handoffAdvertsThroughBrokerProcess(count: count)
        apart.handoff.append(handoffApart.seconds)
        apart.handoffCPU.append(handoffApart.cpu)
        apartLatencies.handoff += handoffApart.latencies
        let rawApart = try rawAdvertsThroughProxyProcess(count: count, size: size, probes: 200)
        apart.raw.append(rawApart.seconds)
        apart.rawCPU.append(rawApart.cpu)
        apartLatencies.raw += rawApart.latencies
    }
    var rawOneAtATime = [Double](repeating: 0, count: 200 * trials)
    guard raw_pub_proxy_sub_latency(Int32(rawOneAtATime.count), size, &rawOneAtATime) == 0 else {
        throw HandoffError(.handoffFailed, "raw one-at-a-time pub/sub failed")
    }
    let handoffSeconds = median(handoffRuns), rawSeconds = median(rawRuns)
    print("Advertisements through a broker, \(count) messages of \(size) B (the size of Handoff's), tcp://127.0.0.1, \(trials) trials each, median")
    row("", "msg/s", "latency p50 / p99 µs")
    row("raw libzmq PUB → proxy → SUB (C)", String(format: "%.0f", Double(count) / rawSeconds),
        String(format: "%.0f / %.0f (under load)", percentile(rawLatencies, 0.5), percentile(rawLatencies, 0.99)))
    row("raw libzmq PUB → proxy → SUB, one at a time (C)", "",
        String(format: "%.0f / %.0f (one at a time)", percentile(rawOneAtATime, 0.5), percentile(rawOneAtATime, 0.99)))
    row("Handoff becomeCurrent → appeared", String(format: "%.0f", Double(count) / handoffSeconds),
        String(format: "%.0f / %.0f (one at a time)", percentile(handoffLatencies, 0.5), percentile(handoffLatencies, 0.99)))
    row("ratio Handoff / raw (throughput)", String(format: "%.1f %%", 100 * rawSeconds / handoffSeconds))
    let batchedSeconds = median(batchedRuns)
    row("Handoff node.becomeCurrent(1,000 at a time) → appeared", String(format: "%.0f", Double(count) / batchedSeconds))
    row("ratio batched Handoff / raw (throughput)", String(format: "%.1f %%", 100 * rawSeconds / batchedSeconds))
    // CPU per message, the whole process (every party and libzmq's threads): steadier than the
    // rates on a 2-core VM, and what a faster path has to lower.
    let handoffMicros = 1e6 * median(handoffCPU) / Double(count), rawMicros = 1e6 * median(rawCPU) / Double(count)
    row("CPU per message, Handoff / raw (µs, whole process)", String(format: "%.1f / %.1f", handoffMicros, rawMicros),
        String(format: "%.1f x", handoffMicros / rawMicros))
    // The broker in a process of its own, as deployments run it (the raw proxy likewise).
    let handoffApart = median(apart.handoff), rawApart = median(apart.raw)
    row("Handoff, broker in its own process", String(format: "%.0f", Double(count) / handoffApart))
    row("raw libzmq, proxy in its own process (C)", String(format: "%.0f", Double(count) / rawApart))
    row("ratio Handoff / raw, broker apart (throughput)", String(format: "%.1f %%", 100 * rawApart / handoffApart))
    let handoffApartMicros = 1e6 * median(apart.handoffCPU) / Double(count), rawApartMicros = 1e6 * median(apart.rawCPU) / Double(count)
    row("CPU per message, broker apart (µs, both processes)", String(format: "%.1f / %.1f", handoffApartMicros, rawApartMicros),
        String(format: "%.1f x", handoffApartMicros / rawApartMicros))
    let apartP50 = (handoff: percentile(apartLatencies.handoff, 0.5), raw: percentile(apartLatencies.raw, 0.5))
    row("one at a time, broker apart: Handoff / raw (µs)", String(format: "%.0f / %.0f", apartP50.handoff, apartP50.raw),
        String(format: "p99 %.0f / %.0f", percentile(apartLatencies.handoff, 0.99), percentile(apartLatencies.raw, 0.99)))
    let handoffRate = Double(count) / handoffSeconds
    compare("advertisements, broker in its own process (msg/s)", handoff: String(format: "%.0f", Double(count) / handoffApart),
            baseline: "raw libzmq, proxy in its own process", String(format: "%.0f", Double(count) / rawApart),
            ratio: String(format: "%.0f %%", 100 * rawApart / handoffApart), target: "≥ 50 %", met: rawApart / handoffApart >= 0.5)
    compare("advertisements (msg/s)", handoff: String(format: "%.0f", handoffRate), baseline: "raw libzmq PUB→proxy→SUB",
            String(format: "%.0f", Double(count) / rawSeconds), ratio: String(format: "%.0f %%", 100 * rawSeconds / handoffSeconds),
            target: "≥ 50 %", met: rawSeconds / handoffSeconds >= 0.5)
    compare("advertisement latency, broker in its own process (µs)",
            handoff: String(format: "%.0f / %.0f", apartP50.handoff, percentile(apartLatencies.handoff, 0.99)),
            baseline: "raw libzmq, proxy in its own process", String(format: "%.0f / %.0f", apartP50.raw, percentile(apartLatencies.raw, 0.99)),
            ratio: String(format: "%.2f x (p50)", apartP50.handoff / apartP50.raw),
            target: "≤ 1.5 x", met: apartP50.handoff <= 1.5 * apartP50.raw)
    compare("advertisement latency p50 / p99 (µs)", handoff: String(format: "%.0f / %.0f", percentile(handoffLatencies, 0.5), percentile(handoffLatencies, 0.99)),
            baseline: "raw libzmq, one at a time", String(format: "%.0f / %.0f", percentile(rawOneAtATime, 0.5), percentile(rawOneAtATime, 0.99)),
            ratio: String(format: "%.2f x (p50)", percentile(handoffLatencies, 0.5) / percentile(rawOneAtATime, 0.5)),
            target: "≤ 1.5 x", met: percentile(handoffLatencies, 0.5) <= 1.5 * percentile(rawOneAtATime, 0.5))

    // NATS and Redis pub/sub: the same number of messages of the same size, through their servers.
    for name in ["nats-server", "redis-server"] {
        guard let server = PeerServer.start(name) else { continue }
        defer { server.stop() }
        var runs: [Double] = [], pooled: [Double] = []
        for _ in 0..<trials {
            var peerSeconds = 0.0
            var peerLatencies = [Double](repeating: 0, count: 200)
            let status = name == "nats-server"
                ? nats_pubsub(server.port, Int32(count), size, &peerSeconds, &peerLatencies, 200)
                : redis_pubsub(server.port, Int32(count), size, &peerSeconds, &peerLatencies, 200)
            guard status == 0 else { break }
            runs.append(peerSeconds)
            pooled += peerLatencies
        }
        guard runs.count == trials else { continue }
        let peerSeconds = median(runs)
        let label = name == "nats-server" ? "NATS pub/sub (nats-server)" : "Redis pub/sub (redis-server)"
        row(label, String(format: "%.0f", Double(count) / peerSeconds),
            String(format: "%.0f / %.0f (under load)", percentile(pooled, 0.5), percentile(pooled, 0.99)))
        compare("advertisements (msg/s)", handoff: String(format: "%.0f", handoffRate), baseline: label,
                String(format: "%.0f", Double(count) / peerSeconds), ratio: String(format: "%.0f %%", 100 * peerSeconds / handoffSeconds),
                target: "ahead", met: handoffSeconds < peerSeconds)
    }
}

/// A node on `broker` that re-advertises rarely and keeps long leases: only what a benchmark sends
/// crosses the bus while it measures.
func brokerNodeConfiguration(_ name: String, broker: Broker) -> Node.Configuration {
    brokerNodeConfiguration(name, at: (broker.frontendEndpoint, broker.backendEndpoint))
}

/// The same, for the broker at (frontend, backend).
func brokerNodeConfiguration(_ name: String, at broker: (frontend: String, backend: String)) -> Node.Configuration {
    var configuration = Node.Configuration(
        name: name, bus: .broker(frontend: broker.frontend, backend: broker.backend), advertiseInterval: .seconds(60))
    configuration.lease = .seconds(300)
    // One node advertises tens of thousands here: far over the quotas meant for a fleet.
    configuration.maxKnownActivitiesPerNode = 1_000_000
    configuration.maxKnownActivities = 1_000_000
    return configuration
}

/// A loopback broker whose per-node quota lets one node advertise as many as a benchmark makes.
func benchBrokerConfiguration() -> Broker.Configuration {
    var configuration = Broker.Configuration(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*")
    configuration.maxActivitiesPerOrigin = 1_000_000
    configuration.cacheCapacity = max(configuration.cacheCapacity, 1_000_000)
    return configuration
}

/// One Handoff trial: a broker and two nodes; 200 activities one at a time (latency from
/// becomeCurrent to the other node's `appeared`), then `count` as fast as they go (throughput).
/// Returns the throughput phase's seconds, the latencies in µs, and the advertisements' size on the wire.
///
/// With `brokerAt` (frontend, backend), the nodes use that broker (in another process) instead of
/// one of their own; the size is then 0, and the CPU seconds include `otherCPU()` (the broker
/// process's CPU time so far) over the same span.
func handoffAdverts(
    count: Int, batch: Int = 1, brokerAt: (frontend: String, backend: String)? = nil,
    otherCPU: () -> Double = { 0 }
) async throws -> (seconds: Double, cpu: Double, latencies: [Double], size: Int) {
    let context = try Context()
    let broker = try brokerAt == nil ? Broker.start(benchBrokerConfiguration(), context: context) : nil
    let endpoints = brokerAt ?? (broker!.frontendEndpoint, broker!.backendEndpoint)
    let publisher = try Node(configuration: brokerNodeConfiguration("publisher", at: endpoints), context: context)
    let (elapsed, cpu, latencies): (Double, Double, [Double]) = try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await publisher.run() }
        defer { group.cancelAll() }
        await publisher.untilRunning()
        return try await Node.withRunning(brokerNodeConfiguration("subscriber", at: endpoints), context: context) { subscriber in
            let events = await subscriber.discover(.type(prefix: "org.handoff.bench."))
            try await Task.sleep(for: .milliseconds(200))
            var latencies: [Double] = []
            var iterator = events.makeAsyncIterator()
            for index in 0..<200 {
                let activity = try UserActivity(activityType: "org.handoff.bench.latency")
                activity.title = "probe \(index)"
                let started = ContinuousClock.now
                try await activity.becomeCurrent(on: publisher)
                while let event = await iterator.next() {
                    if case .appeared(let seen) = event, seen.id == activity.id { break }
                }
                latencies.append(seconds(ContinuousClock.now - started) * 1e6)
            }
            let started = ContinuousClock.now, cpuStarted = processCPUSeconds() + otherCPU()
            if batch > 1 {
                // Node.becomeCurrent([...]): one call into the node per batch.
                for first in stride(from: 0, to: count, by: batch) {
                    let activities = try (first..<min(first + batch, count)).map { index in
                        let activity = try UserActivity(activityType: "org.handoff.bench.advert")
                        activity.title = "advert \(index)"
                        return activity
                    }
                    try await publisher.becomeCurrent(activities)
                }
            } else {
                for index in 0..<count {
                    let activity = try UserActivity(activityType: "org.handoff.bench.advert")
                    activity.title = "advert \(index)"
                    try await activity.becomeCurrent(on: publisher)
                }
            }
            var seen = 0
            while seen < count, let event = await iterator.next() {
                if case .appeared(let activity) = event, activity.activityType == "org.handoff.bench.advert" { seen += 1 }
            }
            return (seconds(ContinuousClock.now - started), processCPUSeconds() + otherCPU() - cpuStarted, latencies)
        }
    }
    guard let broker else { return (elapsed, cpu, latencies, 0) }
    let counters = broker.counters
    await broker.stop()
    return (elapsed, cpu, latencies, max(counters.bytesIn / max(counters.messagesIn, 1), 16))
}

/// CPU time of this whole process so far (every thread, user and system), in seconds.
func processCPUSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// A late joiner's time to see `count` current activities (from the broker's cache).
func benchLateJoiner(count: Int) async throws {
    let context = try Context()
    let broker = try Broker.start(benchBrokerConfiguration(), context: context)
    let publisher = try Node(configuration: brokerNodeConfiguration("publisher", broker: broker), context: context)
    let elapsed: Double = try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await publisher.run() }
        defer { group.cancelAll() }
        await publisher.untilRunning()
        for index in 0..<count {
            let activity = try UserActivity(activityType: "org.handoff.bench.current")
            activity.title = "current \(index)"
            try await activity.becomeCurrent(on: publisher)
        }
        while broker.counters.cachedActivities < count { try await Task.sleep(for: .milliseconds(5)) }
        let started = ContinuousClock.now
        return try await Node.withRunning(brokerNodeConfiguration("late", broker: broker), context: context) { node in
            while await node.activities().count < count { try await Task.sleep(for: .milliseconds(1)) }
            return seconds(ContinuousClock.now - started)
        }
    }
    await broker.stop()
    print("Late joiner: time for a new node to see \(count) current activities (broker cache, no re-advertisement)")
    row("Handoff late joiner", String(format: "%.1f ms", elapsed * 1000))
    let period = Node.Configuration(name: "x", bus: .direct(listen: "tcp://127.0.0.1:*", peers: [])).advertiseInterval
    compare("late joiner sees \(count) activities", handoff: String(format: "%.1f ms", elapsed * 1000), baseline: "waiting for re-advertisement",
            "\(period) (default period)", ratio: String(format: "%.3f of a period", elapsed / seconds(period)),
            target: "at once", met: elapsed < seconds(period) / 10)
}

/// What `becomeCurrent` costs on an idle node with no subscriber, called from a task off the main
/// actor: the API's own share of an advertisement.
func benchBecomeCurrent(count n: Int) async throws {
    let node = try Node(configuration: Node.Configuration(name: "m", bus: .direct(listen: "tcp://127.0.0.1:*", peers: []), subscriptions: []))
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await node.run() }
        await node.untilRunning()
        let started = ContinuousClock.now
        for index in 0..<n {
            let activity = try UserActivity(activityType: "org.handoff.bench.advert")
            activity.title = "advert \(index)"
            try await activity.becomeCurrent(on: node)
        }
        let each = seconds(ContinuousClock.now - started) / Double(n) * 1e6
        print("becomeCurrent on an idle node, \(n) activities one after another")
        row("Handoff becomeCurrent", String(format: "%.1f µs", each), String(format: "%.0f per second", 1e6 / each))
        group.cancelAll()
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
// Every role, Handoff's and the baselines' alike, runs with the allocator the `handoff` command
// uses (AllocatorTuning); `--malloc default` (inherited by the children) leaves glibc's defaults.
let mallocDefault = stringOption("--malloc", in: arguments) == "default"
    || ProcessInfo.processInfo.environment["HANDOFF_BENCH_MALLOC"] == "default"
let allocator = mallocDefault ? AllocatorTuning.Outcome.leftToEnvironment : AllocatorTuning.keepStreamBuffers()
if mallocDefault {
    setenv("HANDOFF_BENCH_MALLOC", "default", 1)
    // A malloc tunable at its default value: `handoff` processes started by this one (agents,
    // brokers) then leave glibc's allocator as it is, too (AllocatorTuning yields to GLIBC_TUNABLES).
    if ProcessInfo.processInfo.environment["GLIBC_TUNABLES"] == nil { setenv("GLIBC_TUNABLES", "glibc.malloc.tcache_count=7", 1) }
}
// Figures on standard output; the nodes' log, warnings and worse only, on standard error.
LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = .warning
    return handler
}
func intOption(_ name: String, _ fallback: Int) -> Int { intOption(name, fallback, in: arguments) }

// A stage that waits for ever (a node that never sees what it waits for) fails the run with a
// message instead of holding it: --timeout S for the whole command, 30 minutes by default.
let watchdogSeconds = intOption("--timeout", 1_800)
Thread.detachNewThread {
    Thread.sleep(forTimeInterval: TimeInterval(watchdogSeconds))
    FileHandle.standardError.write(Data("handoff-bench: \(arguments.first ?? "") did not finish within \(watchdogSeconds) s (--timeout): a stage waits for something that never comes\n".utf8))
    exit(3)
}

func banner() {
    let cores = ProcessInfo.processInfo.activeProcessorCount
    let memory = Double(ProcessInfo.processInfo.physicalMemory) / 1_073_741_824
    let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
        .split(separator: "\n").first { $0.hasPrefix("model name") }?
        .split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "unknown CPU"
    print("handoff-bench on \(ProcessInfo.processInfo.hostName): \(cpu), \(cores) cores, \(String(format: "%.0f", memory)) GiB; libzmq \(ZeroMQLibrary.version.major).\(ZeroMQLibrary.version.minor).\(ZeroMQLibrary.version.patch)")
    print(allocator == .tuned
        ? "allocator: every process as the handoff command runs (AllocatorTuning: trim \(AllocatorTuning.trimThreshold >> 20) MiB, mmap \(AllocatorTuning.mmapThreshold >> 20) MiB)"
        : "allocator: glibc's defaults or GLIBC_TUNABLES (--malloc default)")
    print("tasks: on Handoff's event loops in every process (\(EventLoops.shared.threadCount) each here), as the handoff command runs (EventLoops)")
    #if DEBUG
    print("warning: a debug build; figures mean little. Build with -c release (scripts/bench does).")
    #endif
}

// Every role runs its tasks on the event loops, as the `handoff` command does (task executor
// preference, inherited by the child tasks).
try await withTaskExecutorPreference(EventLoops.shared) {
    switch arguments.first {
    case "all":
        banner()
        let started = ContinuousClock.now
        try await benchAdverts(count: intOption("--count", 20000), trials: intOption("--trials", 3))
        print("")
        try await benchContinue(rounds: intOption("--rounds", 5000))
        print("")
        try await benchStreams(Options(Array(arguments.dropFirst())))
        print("")
        try await benchLateJoiner(count: intOption("--activities", 1000))
        printSummary()
        print(String(format: "\nwhole run: %.0f s", seconds(ContinuousClock.now - started)))
    case "streams":
        banner()
        try await benchStreams(Options(Array(arguments.dropFirst())))
        printSummary()
    case "continue":
        banner()
        try await benchContinue(rounds: intOption("--rounds", 5000))
        printSummary()
    case "adverts":
        banner()
        try await benchAdverts(count: intOption("--count", 20000), trials: intOption("--trials", 3))
        printSummary()
    case "advert-floor":
        banner()
        try await benchAdvertFloor(count: intOption("--count", 100_000), trials: intOption("--trials", 5))
    case "become-current":
        banner()
        try await benchBecomeCurrent(count: intOption("--count", 50000))
    case "checksum":
        banner()
        benchChecksum(Array(arguments.dropFirst()))
        printSummary()
    case "late-joiner":
        banner()
        try await benchLateJoiner(count: intOption("--count", 1000))
        printSummary()
    case "slow-reader":
        banner()
        try benchSlowReader(Array(arguments.dropFirst()))
        printSummary()
    case "hostile":
        banner()
        try await benchHostile(Array(arguments.dropFirst()))
    case "fuzz-memory":
        banner()
        try benchFuzzMemory(Array(arguments.dropFirst()))
        printSummary()
    case "broker-capacity":
        banner()
        try benchBrokerCapacity(Array(arguments.dropFirst()))
        printSummary()
    case "fleet":
        banner()
        try benchFleet(Array(arguments.dropFirst()))
        try benchFleetSteady(Array(arguments.dropFirst()))
        printSummary()
    // Hidden: the two ends of a stream or of continue round trips as processes of their own, and the
    // raw baselines' ends.
    case "stream-originator":
        try await runStreamOriginator(arguments)
    case "stream-continuer":
        try await runStreamContinuer(arguments)
    case "fleet-watcher":
        try await runFleetWatcher(arguments)
    case "raw-stream":
        runRawStream(arguments)
    case "raw-stream-server":
        runRawStreamServer(arguments)
    case "raw-stream-client":
        runRawStreamClient(arguments)
    case "continue-originator":
        try await runContinueOriginator(arguments)
    case "continue-continuer":
        try await runContinueContinuer(arguments)
    case "raw-rep-server":
        runRawReplyServer(arguments)
    case "raw-req-client":
        runRawRequestClient(arguments)
    case "advert-broker":
        try await runAdvertBroker()
    case "raw-proxy":
        await runRawProxy()
    case "capacity-publisher":
        try runCapacityPublisher(arguments)
    case "capacity-subscriber":
        try runCapacitySubscriber(arguments)
    default:
        print("""
            usage: handoff-bench all [--timeout S] [--malloc default] [--count N] [--trials N] [--rounds N] [--size MiB] [--runs N] [--activities N]
                   handoff-bench adverts [--count N] [--trials N]
                                                            advertisements through the broker vs raw libzmq, NATS, Redis
                   handoff-bench advert-floor [--count N] [--trials N]
                                                            what an advertisement costs at the least, against the target's budget
                   handoff-bench continue [--rounds N]      continue round trips vs raw REQ/REP, in one process and between two
                   handoff-bench streams [--size MiB] [--runs N] [--window chunks]
                                                            streams vs raw DEALER/ROUTER, TCP, NATS, Redis; peak memory
                   handoff-bench late-joiner [--count N]    a new node's time to see N current activities
                   handoff-bench checksum [--chunk-kib N] [--mib N]
                                                            CRC-32C per implementation against memcpy
                   handoff-bench become-current [--count N] becomeCurrent alone, on an idle node
                   handoff-bench slow-reader [--seconds S] [--size MiB]
                                                            a stream whose reader is slow: it outlasts every timeout
                   handoff-bench hostile [--contacts N] [--streams N] [--push-mib N] [--dealers N]
                                                            an agent's memory, threads and service under hostile peers
                   handoff-bench fuzz-memory [--inputs N] [--rounds N]
                                                            an agent's memory over identical rounds of fuzzed input
                   handoff-bench broker-capacity [--count N] [--origins N] [--subscribers 1,4] [--trials N] [--memory-activities N]
                                                            what one broker forwards on one CPU, against a raw zmq_proxy;
                                                            its floor; its memory per cached activity
                   handoff-bench fleet [--joiners N] [--activities N] [--flood N] [--nodes N] [--per-node N] [--steady-seconds S]
                                                            simulated nodes joining a real broker one after another,
                                                            a flood from one node, and a fleet at rest
            """)
    }
}
