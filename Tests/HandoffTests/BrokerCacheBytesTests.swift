import Foundation
import HandoffWire
import Testing
import ZeroMQ
@testable import Handoff

/// A real broker's cache bounded in bytes (``Broker/Configuration/cacheBytes``, `--cache-mib`) as
/// well as in activities. (LastValueCacheTests checks the rule with no socket.)
@Suite("A broker's cache bounded in bytes, over real sockets")
struct BrokerCacheBytesTests {
    @Test("advertisements of 48 KiB past a cache of 1 MiB have those that expire soonest make room: the cache holds the latest within its bytes, its snapshot answers them, and cachedBytes says what it holds")
    func largestFramesEvictSoonest() async throws {
        let context = try Context()
        var configuration = Broker.Configuration.ephemeral()
        configuration.cacheBytes = 1 << 20
        let broker = try Broker.start(configuration, context: context)
        let publisher = try await connectPublisher(to: broker, context: context)
        defer { publisher.close() }
        let title = String(repeating: "x", count: 48 << 10)
        let messages = try (0..<40).map { index in
            // Each a second's lease longer than the one before: the first sent expire soonest.
            try BusMessage.advertisement(id: "big\(index)", type: "org.handoff.big", leaseMs: UInt32(60_000 + 1_000 * index), title: title)
        }
        for message in messages { try await publish(message, on: publisher) }
        try await waitUntil(within: .seconds(10)) { broker.counters.messagesIn >= messages.count }
        let counters = broker.counters
        let size = messages.map { $0.topic.count + $0.envelope.count + LastValueCache.entryOverhead }
        let held = counters.cachedActivities
        #expect((16..<40).contains(held), "\(held) cached")
        #expect(counters.cachedBytes == size.suffix(held).reduce(0, +) && counters.cachedBytes <= 1 << 20)
        #expect(counters.cachedBytes + size[39 - held] > 1 << 20, "one more would not have fit")
        let snapshot = try await takeSnapshot(of: "org.handoff.big", at: broker, context: context)
        snapshot.socket.close()
        let kept = Set(messages.indices.suffix(held).map { "big\($0)" })
        #expect(Set(snapshot.advertisements.map(\.activityID)) == kept, "the latest, whose leases end last")
        await broker.stop()
    }

    @Test("a cache too small for one entry of the largest topic and envelope is refused as an invalid configuration")
    func tooSmall() throws {
        var configuration = Broker.Configuration.ephemeral()
        configuration.cacheBytes = 2 * WireLimits.maxBusFrame
        let context = try Context()
        #expect(throws: HandoffError.self) { _ = try Broker.start(configuration, context: context) }
    }
}
