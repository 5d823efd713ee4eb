// handoff-bench: Handoff measured against a raw libzmq baseline doing the same work, in the same run.
// Build and run in release: `swift run -c release handoff-bench streams [--size MiB] [--runs N]`.

import CRawBaselines
import Foundation
import Handoff
import ZeroMQ

struct Options {
    var sizeMiB = 256
    var runs = 5
    var chunk = 256 * 1024
    var window = 16
    /// `handoff` or `raw` to measure one side only (for profiling); both by default.
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
    func configuration(_ name: String, peers: [String]) -> Node.Configuration {
        var configuration = Node.Configuration(name: name, bus: .direct(listen: "tcp://127.0.0.1:*", peers: peers))
        configuration.streamWindow = options.window
        configuration.streamChunkSize = options.chunk
        return configuration
    }
    // One context for both nodes, as the raw baseline uses one for both of its sockets.
    let context = try Context()
    let originator = try Node(configuration: configuration("originator", peers: []), context: context)
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await originator.run() }
        defer { group.cancelAll() }
        await originator.untilRunning()
        return try await Node.withRunning(configuration("continuer", peers: [originator.busEndpoint!]), context: context) { continuer in
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
    print(name.padding(toLength: 44, withPad: " ", startingAt: 0) + value.padding(toLength: 14, withPad: " ", startingAt: 0) + detail)
}

func benchStreams(_ options: Options) async throws {
    let total = options.sizeMiB << 20
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
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

/// Two direct-mode nodes sharing one context (as the raw baselines share one), running for `body`.
func withPair<T: Sendable>(
    lease: Duration = .seconds(30),
    _ body: (_ originator: Node, _ continuer: Node) async throws -> T
) async throws -> T {
    let context = try Context()
    var first = Node.Configuration(name: "originator", bus: .direct(listen: "tcp://127.0.0.1:*", peers: []), advertiseInterval: .seconds(10))
    first.lease = lease
    let originator = try Node(configuration: first, context: context)
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await originator.run() }
        defer { group.cancelAll() }
        await originator.untilRunning()
        var second = Node.Configuration(name: "continuer", bus: .direct(listen: "tcp://127.0.0.1:*", peers: [originator.busEndpoint!]), advertiseInterval: .seconds(10))
        second.lease = lease
        return try await Node.withRunning(second, context: context) { continuer in
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
    let userInfo: [String: UserInfoValue] = ["contactID": "c-42", "firstName": "Ada", "lastName": "Lovelace",
                                              "phoneNumber": "+44 20 7946 0000", "email": "ada@example.org"]
    let handoff: [Double] = try await withPair { originator, continuer in
        let activity = try UserActivity(activityType: "org.handoff.contacts.edit-contact")
        activity.userInfo = userInfo
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
    print("Continue round trip (request → restore handler with the full activity), \(rounds) rounds, tcp://127.0.0.1")
    row("", "p50 µs", "p99 µs")
    row("raw libzmq REQ/REP, 256 B (C)", String(format: "%.0f", percentile(raw, 0.5)), String(format: "%.0f", percentile(raw, 0.99)))
    row("Handoff continueActivity", String(format: "%.0f", percentile(handoff, 0.5)), String(format: "%.0f", percentile(handoff, 0.99)))
    row("ratio Handoff / raw (p50)", String(format: "%.2f x", percentile(handoff, 0.5) / percentile(raw, 0.5)))
}

/// Advertisements: Handoff activities made current on one node and seen by another, against raw
/// PUB → XSUB/XPUB proxy → SUB with messages of the same size.
func benchAdverts(count: Int) async throws {
    let context = try Context()
    let broker = try Broker.start(Broker.Configuration(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context)
    defer { broker.stop() }
    func configuration(_ name: String) -> Node.Configuration {
        var configuration = Node.Configuration(name: name, bus: .broker(frontend: broker.frontendEndpoint, backend: broker.backendEndpoint), advertiseInterval: .seconds(60))
        configuration.lease = .seconds(300)
        return configuration
    }
    let publisher = try Node(configuration: configuration("publisher"), context: context)
    let (handoffSeconds, latencies): (Double, [Double]) = try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await publisher.run() }
        defer { group.cancelAll() }
        await publisher.untilRunning()
        return try await Node.withRunning(configuration("subscriber"), context: context) { subscriber in
            let events = await subscriber.discover(.type(prefix: "org.handoff.bench."))
            try await Task.sleep(for: .milliseconds(200))
            // Latency: one at a time, from becomeCurrent to the subscriber's `appeared`.
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
            // Throughput: `count` activities made current as fast as possible, until all appeared.
            let started = ContinuousClock.now
            for index in 0..<count {
                let activity = try UserActivity(activityType: "org.handoff.bench.advert")
                activity.title = "advert \(index)"
                try await activity.becomeCurrent(on: publisher)
            }
            var seen = 0
            while seen < count, let event = await iterator.next() {
                if case .appeared(let activity) = event, activity.activityType == "org.handoff.bench.advert" { seen += 1 }
            }
            return (seconds(ContinuousClock.now - started), latencies)
        }
    }
    // The raw side sends messages the size of a Handoff advertisement envelope (about 300 bytes).
    let size = 300
    var rawSeconds = 0.0
    var rawLatencies = [Double](repeating: 0, count: 200)
    guard raw_pub_proxy_sub(Int32(count), size, &rawSeconds, &rawLatencies, 200) == 0 else { throw HandoffError(.handoffFailed, "raw pub/sub failed") }
    print("Advertisements through a broker (XSUB/XPUB proxy), \(count) messages of ~\(size) B, tcp://127.0.0.1")
    row("", "msg/s", "latency p50 / p99 µs")
    row("raw libzmq PUB → proxy → SUB (C)", String(format: "%.0f", Double(count) / rawSeconds),
        String(format: "%.0f / %.0f (under load)", percentile(rawLatencies, 0.5), percentile(rawLatencies, 0.99)))
    row("Handoff becomeCurrent → appeared", String(format: "%.0f", Double(count) / handoffSeconds),
        String(format: "%.0f / %.0f (one at a time)", percentile(latencies, 0.5), percentile(latencies, 0.99)))
    row("ratio Handoff / raw (throughput)", String(format: "%.1f %%", 100 * rawSeconds / handoffSeconds))
}

/// A late joiner's time to see `count` current activities (from the broker's cache).
func benchLateJoiner(count: Int) async throws {
    let context = try Context()
    let broker = try Broker.start(Broker.Configuration(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context)
    defer { broker.stop() }
    var configuration = Node.Configuration(name: "publisher", bus: .broker(frontend: broker.frontendEndpoint, backend: broker.backendEndpoint), advertiseInterval: .seconds(60))
    configuration.lease = .seconds(300)
    let publisher = try Node(configuration: configuration, context: context)
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
        var late = configuration
        late.name = "late"
        let started = ContinuousClock.now
        return try await Node.withRunning(late, context: context) { node in
            while await node.activities().count < count { try await Task.sleep(for: .milliseconds(1)) }
            return seconds(ContinuousClock.now - started)
        }
    }
    print("Late joiner: time for a new node to see \(count) current activities (broker cache, no re-advertisement)")
    row("Handoff late joiner", String(format: "%.1f ms", elapsed * 1000))
}

let arguments = Array(CommandLine.arguments.dropFirst())
func intOption(_ name: String, _ fallback: Int) -> Int {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return fallback }
    return Int(arguments[index + 1]) ?? fallback
}
switch arguments.first {
case "streams":
    try await benchStreams(Options(Array(arguments.dropFirst())))
case "continue":
    try await benchContinue(rounds: intOption("--rounds", 5000))
case "adverts":
    try await benchAdverts(count: intOption("--count", 20000))
case "late-joiner":
    try await benchLateJoiner(count: intOption("--count", 1000))
default:
    print("usage: handoff-bench streams [--size MiB] [--runs N] [--window chunks] | continue [--rounds N] | adverts [--count N] | late-joiner [--count N]")
}
