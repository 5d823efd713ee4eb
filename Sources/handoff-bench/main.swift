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

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "streams":
    try await benchStreams(Options(Array(arguments.dropFirst())))
default:
    print("usage: handoff-bench streams [--size MiB] [--runs N] [--window chunks]")
}
