import CPeerBaselines
import CRawBaselines
import Foundation
import Handoff
import Synchronization
import ZeroMQ

struct Options {
    var sizeMiB = 256
    /// Streams of 256 MiB take about 0.1 s here: enough runs that the median holds still.
    var runs = 21
    var chunk = 256 * 1024
    var window = 16
    /// `handoff` or `raw` to measure one side only (for profiling), or `processes` for the streams'
    /// comparison between two processes alone; everything by default.
    var only: String?
    /// The checksum both ends' writers end with (CRC-32C unless asked).
    var checksum = StreamChecksum.crc32c

    init(sizeMiB: Int = 256, runs: Int = 21, window: Int = 16, only: String? = nil, checksum: StreamChecksum = .crc32c) {
        self.sizeMiB = sizeMiB
        self.runs = runs
        self.window = window
        self.only = only
        self.checksum = checksum
    }

    /// What a child process needs to run its end as this run does.
    var childArguments: [String] { ["--window", "\(window)", "--checksum", checksum.rawValue] }

    /// How the rows name Handoff's side, and the figures' names end: the algorithm, when it is not
    /// the default.
    var handoffLabel: String { checksum == .crc32c ? "Handoff" : "Handoff (\(checksum))" }

    /// The target (≥ 90 % of raw) is the default's: a slower checksum is the application's choice.
    var streamTarget: String { checksum == .crc32c ? "≥ 90 %" : "" }
    var checksumSuffix: String { checksum == .crc32c ? "" : ", \(checksum) ends" }

    /// From a child process's arguments (`--size`, `--runs`, `--window`, `--only`, `--checksum`).
    init(_ arguments: [String]) {
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "--size": sizeMiB = Int(iterator.next() ?? "") ?? sizeMiB
            case "--runs": runs = Int(iterator.next() ?? "") ?? runs
            case "--window": window = Int(iterator.next() ?? "") ?? window
            case "--only": only = iterator.next()
            case "--checksum": checksum = StreamChecksum(rawValue: iterator.next() ?? "") ?? checksum
            default: break
            }
        }
    }
}

/// Writes `total` bytes to every stream opened to the activity, a chunk at a time from one reused
/// buffer of a chunk's size: the bytes the raw server sends (`serve_chunks`, raw_baselines.c), so
/// that both copy from a source equally hot. (It wrote 2 MiB at a time from a buffer of 2 MiB
/// until 2026-12-06: each chunk's copy then read its source from beyond the CPU's 512 KiB L2
/// cache, where raw's came from within it; on a Zen 3 VM that copy took 28 µs a chunk against
/// raw's 17, under perf.)
final class Writer: UserActivityDelegate {
    let total: Int
    let buffer: [UInt8]
    /// The process's CPU seconds when the first pair opened (``processCPUSeconds()``).
    private let openedAt = Mutex<Double?>(nil)
    init(total: Int, chunk: Int) {
        self.total = total
        buffer = [UInt8](repeating: 0x5A, count: chunk)
    }

    var cpuAtOpen: Double? { openedAt.withLock { $0 } }

    func userActivity(_ activity: UserActivity, didReceive streams: ContinuationStreams) async {
        openedAt.withLock { $0 = $0 ?? processCPUSeconds() }
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

/// One Handoff stream of `total` bytes between two nodes over loopback (one context for both, as
/// the raw baseline uses one for both of its sockets); returns seconds.
func handoffStream(total: Int, options: Options) async throws -> Double {
    try await withPair(configured: { streamConfiguration($0, peers: $1, options: options) }) { originator, continuer in
        let writer = Writer(total: total, chunk: options.chunk)
        let activity = try UserActivity(activityType: "org.handoff.bench.bulk")
        activity.supportsContinuationStreams = true
        activity.delegate = writer
        try await activity.becomeCurrent(on: originator)
        await continuer.setContinuationHandler(forType: activity.activityType) { _ in }
        let found = try await waitFor(activity.id, on: continuer)
        guard case .restored(let continued) = try await continuer.continueActivity(found) else { return -1 }
        MeasuredSpan.begin()
        let started = ContinuousClock.now
        let streams = try await continuer.openStreams(for: continued)
        var received = 0
        for try await chunk in streams.input { received += chunk.count }
        let elapsed = ContinuousClock.now - started
        MeasuredSpan.end()
        guard received == total else { throw HandoffError(.streamTruncated, "received \(received) of \(total)") }
        return seconds(elapsed)
    }
}

func benchStreams(_ options: Options) async throws {
    let total = options.sizeMiB << 20
    if options.only == "processes" {
        print("Streams: \(options.sizeMiB) MiB between two processes, chunk \(options.chunk / 1024) KiB, window \(options.window), \(options.runs) runs each, interleaved; median")
        return try benchStreamsBetweenProcesses(options, runs: options.runs)
    }
    print("Streams: \(options.sizeMiB) MiB over tcp://127.0.0.1 within one process (one libzmq context, one I/O thread, on each side of the comparison), chunk \(options.chunk / 1024) KiB, window \(options.window), \(options.runs) runs each, interleaved; median")
    var raw: [Double] = []
    var rawChecked: [Double] = []
    var handoff: [Double] = []
    _ = try await handoffStream(total: 16 << 20, options: options)  // warm-up
    _ = raw_dealer_router_transfer(UInt64(16 << 20), options.chunk, Int32(options.window), 0)
    for _ in 0..<options.runs {
        if options.only != "handoff" {
            let rawSeconds = raw_dealer_router_transfer(UInt64(total), options.chunk, Int32(options.window), 0)
            // The same with a Handoff stream's work on its bytes (CRC-32C at both ends): how much
            // of the gap to raw is the contract's checksum, how much the rest of Handoff.
            let checkedSeconds = raw_dealer_router_transfer(UInt64(total), options.chunk, Int32(options.window), 1)
            guard rawSeconds > 0, checkedSeconds > 0 else { throw HandoffError(.handoffFailed, "the raw baseline failed") }
            raw.append(rawSeconds)
            rawChecked.append(checkedSeconds)
        }
        if options.only != "raw" {
            handoff.append(try await handoffStream(total: total, options: options))
        }
    }
    guard options.only == nil else {
        for (name, times) in [("raw", raw), ("raw + CRC-32C", rawChecked), ("handoff", handoff)] where !times.isEmpty {
            row(name, String(format: "%.0f MiB/s", Double(options.sizeMiB) / median(times)))
        }
        return
    }
    let rawRate = Double(options.sizeMiB) / median(raw)
    let handoffRate = Double(options.sizeMiB) / median(handoff)
    row("", "MiB/s", "seconds (median; all runs)")
    row("raw libzmq DEALER/ROUTER with credit (C)", String(format: "%.0f", rawRate), medianAndRuns(raw))
    row("\(options.handoffLabel == "Handoff" ? "Handoff (CRC-32C)" : options.handoffLabel) continuation stream", String(format: "%.0f", handoffRate), medianAndRuns(handoff))
    row("ratio Handoff / raw", String(format: "%.1f %%", 100 * handoffRate / rawRate))
    let checkedRate = Double(options.sizeMiB) / median(rawChecked)
    row("raw libzmq + CRC-32C at both ends, as Handoff (C)", String(format: "%.0f", checkedRate),
        medianAndRuns(rawChecked))
    row("ratio Handoff / raw + CRC-32C", String(format: "%.1f %%", 100 * handoffRate / checkedRate))
    compare("stream \(options.sizeMiB) MiB\(options.checksumSuffix) (MiB/s)", handoff: String(format: "%.0f", handoffRate), baseline: "raw libzmq DEALER/ROUTER",
            String(format: "%.0f", rawRate), ratio: String(format: "%.0f %%", 100 * handoffRate / rawRate),
            target: options.streamTarget, met: options.checksum == .crc32c ? handoffRate >= 0.9 * rawRate : nil)
    compare("stream \(options.sizeMiB) MiB\(options.checksumSuffix) (MiB/s)", handoff: String(format: "%.0f", handoffRate), baseline: "raw libzmq + CRC-32C at both ends",
            String(format: "%.0f", checkedRate), ratio: String(format: "%.0f %%", 100 * handoffRate / checkedRate))

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
        compare("stream \(options.sizeMiB) MiB\(options.checksumSuffix) (MiB/s)", handoff: String(format: "%.0f", handoffRate), baseline: name,
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
        row("\(options.handoffLabel), \(size) MiB between two processes", String(format: "%.0f", Double(size) / run.seconds),
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
    // Every run the options ask for (21 by default): between two processes each transfer's time
    // spreads over 2x on a 2-core VM (the scheduler places four busy threads on two CPUs), and a
    // median of 9 swung the ratio between 79 and 110 % from one `all` run to the next.
    try benchStreamsBetweenProcesses(options, runs: options.runs)
}

/// The figure users see: Handoff between two processes against raw libzmq between two processes,
/// interleaved, same size, chunk and window.
func benchStreamsBetweenProcesses(_ options: Options, runs apartRuns: Int) throws {
    let total = options.sizeMiB << 20
    /// `runs` transfers each, raw and Handoff, interleaved.
    func interleaved(_ runs: Int, _ placement: Placement, checked: Bool = false) throws
        -> (raw: [ProcessStreamRun], handoff: [ProcessStreamRun], checked: [ProcessStreamRun]) {
        var raw: [ProcessStreamRun] = [], handoff: [ProcessStreamRun] = [], rawChecked: [ProcessStreamRun] = []
        for _ in 0..<runs {
            raw.append(try rawStreamBetweenProcesses(total: total, options: options, placement: placement))
            if checked { rawChecked.append(try rawStreamBetweenProcesses(total: total, options: options, placement: placement, checksum: true)) }
            handoff.append(try streamBetweenProcesses(total: total, options: options, placement: placement))
        }
        return (raw, handoff, rawChecked)
    }
    func rate(_ runs: [ProcessStreamRun]) -> Double { Double(options.sizeMiB) / median(runs.map(\.seconds)) }
    func timings(_ runs: [ProcessStreamRun]) -> String { runTimes(runs.map(\.seconds)) }

    let (rawApart, handoffApart, checkedApart) = try interleaved(apartRuns, .free, checked: true)
    let rawApartRate = rate(rawApart), handoffApartRate = rate(handoffApart)
    row("raw libzmq, \(options.sizeMiB) MiB between two processes", String(format: "%.0f", rawApartRate),
        "\(mebibytes(rawApart.map(\.originatorPeak).max() ?? 0)) / \(mebibytes(rawApart.map(\.continuerPeak).max() ?? 0)); median of \(apartRuns): " + timings(rawApart))
    row("\(options.handoffLabel), \(options.sizeMiB) MiB between two processes", String(format: "%.0f", handoffApartRate), "median of \(apartRuns), interleaved: " + timings(handoffApart))
    row("ratio Handoff / raw, between processes", String(format: "%.1f %%", 100 * handoffApartRate / rawApartRate))
    let checkedApartRate = rate(checkedApart)
    row("raw + CRC-32C at both ends, between two processes", String(format: "%.0f", checkedApartRate),
        "median of \(apartRuns), interleaved: " + timings(checkedApart))
    row("ratio Handoff / raw + CRC-32C, between processes", String(format: "%.1f %%", 100 * handoffApartRate / checkedApartRate))
    compare("stream \(options.sizeMiB) MiB between processes\(options.checksumSuffix) (MiB/s)", handoff: String(format: "%.0f", handoffApartRate),
            baseline: "raw libzmq DEALER/ROUTER, two processes", String(format: "%.0f", rawApartRate),
            ratio: String(format: "%.0f %%", 100 * handoffApartRate / rawApartRate), target: options.streamTarget,
            met: options.checksum == .crc32c ? handoffApartRate >= 0.9 * rawApartRate : nil)
    compare("stream \(options.sizeMiB) MiB between processes\(options.checksumSuffix) (MiB/s)", handoff: String(format: "%.0f", handoffApartRate),
            baseline: "raw libzmq + CRC-32C, two processes", String(format: "%.0f", checkedApartRate),
            ratio: String(format: "%.0f %%", 100 * handoffApartRate / checkedApartRate))
    // What each end's process spent on the transfer (every thread: its loops and libzmq's I/O
    // thread), per GiB moved: steadier than the rate on a VM whose scheduling varies from run to
    // run, and what a deployment pays for the bytes it streams.
    func cpuPerGiB(_ runs: [ProcessStreamRun]) -> (writing: Double, reading: Double) {
        let scale = 1000 * 1024 / Double(options.sizeMiB)  // seconds per transfer → ms per GiB
        return (median(runs.map(\.originatorCPU)) * scale, median(runs.map(\.continuerCPU)) * scale)
    }
    func both(_ name: String, _ cpu: (writing: Double, reading: Double)) {
        row(name, String(format: "%.0f", cpu.writing + cpu.reading), String(format: "writing end %.0f, reading end %.0f", cpu.writing, cpu.reading))
    }
    let (rawCPU, checkedCPU, handoffCPU) = (cpuPerGiB(rawApart), cpuPerGiB(checkedApart), cpuPerGiB(handoffApart))
    row("CPU per GiB between processes, both ends (ms)", "", "median of \(apartRuns) each")
    both("  raw libzmq", rawCPU)
    both("  raw + CRC-32C at both ends", checkedCPU)
    both("  \(options.handoffLabel)", handoffCPU)
    let checkedTotal = checkedCPU.writing + checkedCPU.reading
    compare("stream CPU per GiB between processes, both ends (ms)", handoff: String(format: "%.0f", handoffCPU.writing + handoffCPU.reading),
            baseline: "raw libzmq + CRC-32C, two processes", String(format: "%.0f", checkedTotal),
            ratio: String(format: "%.2f x", (handoffCPU.writing + handoffCPU.reading) / max(checkedTotal, 1e-9)))
    // The same with each process held to one CPU: what the scheduler's placement costs each side.
    guard Placement.canPin else { return }
    let pinnedRuns = max(3, min(apartRuns, 5))
    let (rawPinned, handoffPinned, _) = try interleaved(pinnedRuns, .onePerProcess)
    let rawPinnedRate = rate(rawPinned), handoffPinnedRate = rate(handoffPinned)
    row("raw libzmq, each process on one CPU", String(format: "%.0f", rawPinnedRate), "median of \(pinnedRuns): " + timings(rawPinned))
    row("\(options.handoffLabel), each process on one CPU", String(format: "%.0f", handoffPinnedRate), "median of \(pinnedRuns), interleaved: " + timings(handoffPinned))
    row("ratio Handoff / raw, each process on one CPU", String(format: "%.1f %%", 100 * handoffPinnedRate / rawPinnedRate))
    compare("the same, each process on one CPU (MiB/s)", handoff: String(format: "%.0f", handoffPinnedRate),
            baseline: "raw libzmq, each process on one CPU", String(format: "%.0f", rawPinnedRate),
            ratio: String(format: "%.0f %%", 100 * handoffPinnedRate / rawPinnedRate))
}
