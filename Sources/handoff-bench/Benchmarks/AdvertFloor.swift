import Foundation
import Handoff
import HandoffWire

/// `handoff-bench advert-floor`: what an advertisement costs at the least, step by step, on one
/// thread and without a socket, against the CPU budget that issue 14's throughput target (half the
/// raw proxy's rate) leaves for it on this machine, measured in the same run.
///
/// The steps are the contract's and the API's, not Handoff's implementation, each done by the
/// cheapest code there is for it (the envelope by the hand-written codec of the hot envelopes, its
/// advertisement in plain values, `encoded(advertisement:…)` and `WireBusEnvelope.decode`;
/// SwiftProtobuf's own took 1.62 against 1.42 µs to encode and 2.02 against 1.21 to decode on the
/// project's VM, and the generated messages by hand more than the plain values): the application makes an activity; the publisher
/// encodes its Envelope; the broker reads the fields its cache and sender check need
/// (``WireBusSummary``) and keeps the envelope under the activity id; the subscriber decodes the
/// Envelope and keeps what it learnt under the id; the watcher is handed the news through an
/// `AsyncStream`. Every other thing Handoff does per advertisement (replay protection, quotas,
/// leases, the sender check's comparisons, metrics, the event loops) comes on top, and so does the
/// transport.
func benchAdvertFloor(count: Int, trials: Int) async throws {
    let (steps, size) = try await advertFloorSteps(count: count, trials: trials)
    let floor = steps.reduce(0) { $0 + median($1.micros) }
    print("What one advertisement costs at the least (\(count) advertisements of \(size) B, one thread, no socket, median of \(trials))")
    row("", "µs each")
    for step in steps { row(step.name, String(format: "%.2f", median(step.micros))) }
    row("the floor: every step above", String(format: "%.2f", floor))

    // The budget: on `cores` CPUs, half the raw proxy's rate leaves cores / (rate / 2) of CPU per
    // message, for everything every party does, libzmq's own work included.
    let cores = ProcessInfo.processInfo.activeProcessorCount
    var rawApart: [(seconds: Double, cpu: Double, latencies: [Double], proxyCPU: Double)] = []
    for _ in 0..<trials { rawApart.append(try rawAdvertsThroughProxyProcess(count: count, size: size)) }
    let rawRate = Double(count) / median(rawApart.map(\.seconds))
    let rawMicros = 1e6 * median(rawApart.map(\.cpu)) / Double(count)
    let budget = 1e6 * Double(cores) / (rawRate / 2)
    print("")
    print("Against issue 14's target: half the raw proxy's rate (proxy in its own process, \(size) B, same run), on \(cores) CPUs")
    row("raw libzmq PUB → proxy → SUB", String(format: "%.0f msg/s", rawRate), String(format: "%.2f µs of CPU per message, every process", rawMicros))
    row("half of it", String(format: "%.0f msg/s", rawRate / 2), String(format: "leaves %.2f µs of CPU per advertisement", budget))
    row("the floor + raw transport", String(format: "%.2f µs", floor + rawMicros),
        String(format: "%.0f %% of the budget", 100 * (floor + rawMicros) / budget))
    row("the floor alone (a transport costing nothing)", String(format: "%.2f µs", floor),
        String(format: "%.0f %% of the budget", 100 * floor / budget))
    row("best rate the floor + raw transport allow", String(format: "%.0f msg/s", 1e6 * Double(cores) / (floor + rawMicros)),
        String(format: "%.0f %% of raw", 100 * (1e6 * Double(cores) / (floor + rawMicros)) / rawRate))
}

/// Each step of the floor timed `trials` times over `count` advertisements (µs per advertisement),
/// and the advertisements' size on the wire.
func advertFloorSteps(count: Int, trials: Int) async throws -> (steps: [(name: String, micros: [Double])], size: Int) {
    let node = floorNode()
    var steps: [(name: String, micros: [Double])] = [
        ("app: UserActivity(activityType:), title", []),
        ("publisher: encode the Envelope (by hand, plain values)", []),
        ("broker: read its summary (by hand)", []),
        ("broker: keep the envelope under the activity id", []),
        ("subscriber: decode the Envelope (by hand, plain values)", []),
        ("subscriber: keep the advertisement under the id", []),
        ("watcher: one AsyncStream element in and out", []),
    ]
    var size = 0
    var checksum = 0
    for _ in 0..<trials {
        var step = 0
        func timed<T>(_ body: () async throws -> T) async rethrows -> T {
            let started = ContinuousClock.now
            let result = try await body()
            steps[step].micros.append(1e6 * seconds(ContinuousClock.now - started) / Double(count))
            step += 1
            return result
        }
        let activities = try await timed {
            try (0..<count).map { index in
                let activity = try UserActivity(activityType: "org.handoff.bench.advert")
                activity.title = "advert \(index)"
                return activity
            }
        }
        // What the node reads off each activity is copied out beforehand: the encoding is timed alone.
        let advertisements = activities.map { floorAdvertisement($0, origin: node) }
        // The sender encoded once, as a node's envelopes have it (EnvelopeBuilder).
        let sender = WireEnvelopeSender(node)
        let encoded = await timed {
            advertisements.enumerated().map { index, advertisement in
                WireEnvelope.encoded(advertisement: advertisement, sender: sender, sequence: UInt64(index + 1))
            }
        }
        size = encoded[0].count
        let summaries = await timed {
            encoded.map { bytes in bytes.withUnsafeBytes { try? WireBusSummary.read($0) } }
        }
        var cache: [String: [UInt8]] = [:]
        await timed {
            for (summary, bytes) in zip(summaries, encoded) {
                guard case .advertisement(let activityID, _, _, _, _) = summary?.body else { continue }
                cache[activityID] = bytes
            }
        }
        let decoded = await timed { encoded.map { bytes in bytes.withUnsafeBytes { try? WireBusEnvelope.decode($0) } } }
        var known: [String: KnownAdvertisement] = [:]
        await timed {
            for envelope in decoded {
                guard case .advertisement(let read)? = envelope else { continue }
                known[read.advertisement.activityID] = KnownAdvertisement(read.advertisement)
            }
        }
        let delivered = await timed {
            let (stream, continuation) = AsyncStream<KnownAdvertisement>.makeStream()
            for advertisement in known.values { continuation.yield(advertisement) }
            continuation.finish()
            var delivered = 0
            for await known in stream where !known.advertisement.title.isEmpty { delivered += 1 }
            return delivered
        }
        checksum += cache.count + known.count + delivered
    }
    guard checksum == 3 * count * trials else { throw HandoffError(.handoffFailed, "the floor lost advertisements: \(checksum)") }

    return (steps, size)
}

/// What a subscriber keeps of an advertisement and hands its watchers: one object (a reference
/// count to pass on, where the plain values are a dozen), as `DiscoveredActivity` is.
private final class KnownAdvertisement: Sendable {
    let advertisement: WirePlainAdvertisement

    init(_ advertisement: WirePlainAdvertisement) {
        self.advertisement = advertisement
    }
}

/// The publishing node as the benchmark's nodes describe themselves (no CURVE key: the advertisement
/// benchmark's bus is not secured).
private func floorNode() -> WireNodeRef {
    var node = WireNodeRef()
    node.nodeID = UUID().uuidString
    node.name = "publisher"
    node.host = ProcessInfo.processInfo.hostName
    return node
}

/// The advertisement a node publishes for `activity` (the fields `UserActivity.advertisement` sets).
private func floorAdvertisement(_ activity: UserActivity, origin: WireNodeRef) -> WirePlainAdvertisement {
    var advertisement = WirePlainAdvertisement()
    advertisement.activityID = activity.id
    advertisement.activityType = activity.activityType
    advertisement.title = activity.title
    advertisement.origin = origin
    advertisement.continueEndpoint = "tcp://127.0.0.1:45111"
    advertisement.version = 1
    advertisement.leaseMs = 300_000
    advertisement.updatedAt = WireTimestamp(Date())
    return advertisement
}
