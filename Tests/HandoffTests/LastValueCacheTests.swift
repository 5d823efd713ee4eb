import Foundation
import Testing
import ZeroMQ
@testable import Handoff

@Suite("Last-value cache (state, no sockets)")
struct LastValueCacheTests {
    /// An advertisement's message (topic, real envelope) as a publisher sends it.
    private func advertisement(_ id: String, origin: String = "a", key: [UInt8] = [], version: UInt64 = 1, leaseMs: UInt32 = 60_000, host: String = "test") -> [Frame] {
        BrokerCoreTests.advertisement(id, from: origin, key: key, version: version, leaseMs: leaseMs, host: host)
    }

    @Test("an origin gets its quota and no more; updates, withdrawals and other origins are not held up")
    func perOriginQuota() {
        var cache = LastValueCache(capacity: 100, perOriginQuota: 3, defaultLease: .seconds(30))
        let now = ContinuousClock.now
        for index in 0..<3 { let outcome = cache.store(advertisement("a\(index)"), now: now); #expect(outcome == .stored) }
        do { let outcome = cache.store(advertisement("a3"), now: now); #expect(outcome == .overQuota) }
        do { let outcome = cache.store(advertisement("a1", version: 2), now: now); #expect(outcome == .stored) }
        do { let outcome = cache.store(advertisement("b0", origin: "b"), now: now); #expect(outcome == .stored) }
        #expect(cache.perOrigin == ["a": 3, "b": 1])
        cache.remove("a0")
        do { let outcome = cache.store(advertisement("a3"), now: now); #expect(outcome == .stored) }
        #expect(cache.count == 4)
    }

    @Test("a cached copy keeps the topic and envelope apart: the envelope alone for snapshots, the topic matched by prefix")
    func cachedFrames() {
        var cache = LastValueCache(capacity: 10, defaultLease: .seconds(30))
        let message = advertisement("one")
        cache.store(message, now: .now)
        #expect(cache.live(matching: Array("A:".utf8), now: .now) == [message[1].bytes])
        #expect(cache.live(matching: Array("A:u".utf8), now: .now).isEmpty)
    }

    @Test("an entry's id is found where it lies in the entry's own copy, also after an update that moved it there")
    func idsLieInTheCopies() {
        var cache = LastValueCache(capacity: 10, defaultLease: .seconds(30))
        let now = ContinuousClock.now
        let id = "0F6E3D2C-5B4A-4938-8271-605F4E3D2C1B"
        do { let outcome = cache.store(advertisement(id, version: 1), now: now); #expect(outcome == .stored) }
        // The same origin with a longer host: every byte after the sender, the id's among them, moves.
        do { let outcome = cache.store(advertisement(id, version: 2, host: String(repeating: "h", count: 300)), now: now); #expect(outcome == .stored) }
        #expect(cache.ids == [id])
        #expect(cache.version(of: id) == 2 && cache.count == 1)
        do { let outcome = cache.store(advertisement(id, version: 1), now: now); #expect(outcome == .stale) }
        cache.renew(origin: "a", listed: [id], partial: false, lease: .seconds(60), now: now)
        #expect(cache.contains(id))
        let moved = advertisement(id, version: 3, host: "h")
        cache.store(moved, now: now)
        cache.remove(id)
        #expect(cache.count == 0 && cache.perOrigin.isEmpty)
    }

    @Test("presence renews an origin's listed activities and forgets the rest, unless the list is partial")
    func presence() {
        var cache = LastValueCache(capacity: 100, defaultLease: .seconds(30))
        let now = ContinuousClock.now
        for id in ["a1", "a2", "a3"] { _ = cache.store(advertisement(id, leaseMs: 100), now: now) }
        _ = cache.store(advertisement("b1", origin: "b", leaseMs: 100), now: now)
        // A partial list renews what it lists and drops nothing.
        cache.renew(origin: "a", listed: ["a1", "a2"], partial: true, lease: .seconds(10), now: now)
        #expect(cache.perOrigin == ["a": 3, "b": 1])
        var lapsed: [(origin: String, id: String)] = []
        do { let changed = cache.removeExpired(now: now + .milliseconds(200)) { lapsed.append(($0, $1)) }; #expect(changed) }
        // a3 and b1 lapsed on their own 100 ms leases, each named with its origin; a1 and a2 were renewed.
        #expect(cache.ids == ["a1", "a2"])
        #expect(lapsed.map { "\($0.origin)/\($0.id)" }.sorted() == ["a/a3", "b/b1"])
        // A whole list drops what it does not list.
        cache.renew(origin: "a", listed: ["a1"], partial: false, lease: .seconds(10), now: now)
        #expect(cache.perOrigin == ["a": 1])
        cache.renew(origin: "nobody", listed: [], partial: false, lease: .seconds(1), now: now)
        #expect(cache.count == 1)
    }

    @Test("a key's quota holds over every node that names it: it cannot fill the cache nor evict others; withdrawing one makes room; no key, no key quota")
    func keyQuota() {
        var cache = LastValueCache(capacity: 6, perOriginQuota: 2, perKeyQuota: 3, defaultLease: .seconds(30))
        let now = ContinuousClock.now
        let member = [UInt8](repeating: 7, count: 32), other = [UInt8](repeating: 8, count: 32)
        var outcomes: [LastValueCache.Outcome] = []
        for node in ["n1", "n2", "n3"] {
            for id in ["a", "b"] { outcomes.append(cache.store(advertisement("\(node)-\(id)", origin: node, key: member), now: now)) }
        }
        #expect(outcomes == [.stored, .stored, .stored, .overKeyQuota, .overKeyQuota, .overKeyQuota])
        #expect(cache.perKey == [member: 3])
        // Another member's and a keyless node's still fit, and nothing of the first was evicted for them.
        let others = [cache.store(advertisement("o-a", origin: "o", key: other), now: now),
                      cache.store(advertisement("p-a", origin: "p"), now: now), cache.store(advertisement("p-b", origin: "p"), now: now)]
        #expect(others == [.stored, .stored, .stored])
        #expect(cache.count == 6 && cache.perKey == [member: 3, other: 1])
        // An update of one it holds passes; a withdrawal gives quota back.
        #expect(cache.store(advertisement("n1-a", origin: "n1", key: member, version: 2), now: now) == .stored)
        cache.remove("n2-a")
        #expect(cache.perKey == [member: 2, other: 1])
        #expect(cache.store(advertisement("n3-a", origin: "n3", key: member), now: now) == .stored)
    }

    @Test("a lease past the contract's hour is cached for an hour, and a presence renews for no longer")
    func leasesAreCapped() {
        var cache = LastValueCache(capacity: 10, perOriginQuota: 10, defaultLease: .seconds(30))
        let now = ContinuousClock.now
        let stored = cache.store(advertisement("weeks", leaseMs: .max), now: now)
        #expect(stored == .stored)
        let withinTheHour = cache.removeExpired(now: now + .seconds(3_599))
        #expect(!withinTheHour)
        let pastTheHour = cache.removeExpired(now: now + .seconds(3_601))
        #expect(pastTheHour, "an advertisement claiming 49 days is still cached after an hour")
        #expect(cache.count == 0)
    }

    @Test("bounded in bytes as well as entries: a new or grown entry past the bytes has those that expire soonest make room, and a removal gives its bytes back")
    func boundedInBytes() {
        let now = ContinuousClock.now
        func size(_ frames: [Frame]) -> Int { frames.reduce(0) { $0 + $1.count } + LastValueCache.entryOverhead }
        let messages = ["s0", "s1", "s2", "s3"].enumerated().map { advertisement($1, leaseMs: UInt32(20_000 + 10_000 * $0)) }
        let one = size(messages[0])
        #expect(messages.allSatisfy { size($0) == one })
        var cache = LastValueCache(capacity: 100, maxBytes: 3 * one, defaultLease: .seconds(30))
        for message in messages.prefix(3) { cache.store(message, now: now) }
        #expect(cache.count == 3 && cache.bytes == 3 * one)
        cache.store(messages[3], now: now)
        #expect(cache.ids == ["s1", "s2", "s3"] && cache.bytes == 3 * one, "s0 expired soonest")
        // s3 grows (a longer host in its envelope): s1, the soonest, makes room.
        let grown = advertisement("s3", version: 2, leaseMs: 50_000, host: String(repeating: "h", count: 60))
        cache.store(grown, now: now)
        #expect(cache.ids == ["s2", "s3"] && cache.bytes == one + size(grown))
        cache.remove("s2")
        #expect(cache.bytes == size(grown))
        cache.remove("s3")
        #expect(cache.bytes == 0 && cache.count == 0)
    }

    @Test("expiry and eviction give quota back; an older version is stale")
    func expiryAndEviction() {
        var cache = LastValueCache(capacity: 2, perOriginQuota: 2, defaultLease: .seconds(30))
        let now = ContinuousClock.now
        do { let outcome = cache.store(advertisement("short", leaseMs: 100), now: now); #expect(outcome == .stored) }
        do { let outcome = cache.store(advertisement("long", version: 5), now: now); #expect(outcome == .stored) }
        do { let outcome = cache.store(advertisement("long", version: 4), now: now); #expect(outcome == .stale) }
        do { let outcome = cache.removeExpired(now: now + .milliseconds(200)); #expect(outcome) }
        #expect(cache.perOrigin == ["a": 1])
        do { let outcome = cache.store(advertisement("next"), now: now); #expect(outcome == .stored) }
        // Full (capacity 2): another origin's new activity evicts the one expiring soonest.
        do { let outcome = cache.store(advertisement("b", origin: "b", leaseMs: 90_000), now: now); #expect(outcome == .stored) }
        #expect(cache.count == 2)
        #expect(cache.perOrigin.values.reduce(0, +) == 2)
        #expect(cache.live(matching: Array("A:".utf8), now: now).count == 2)
    }

    @Test("renewals cost the heap nothing, and a renewed entry is neither expired nor evicted as the soonest")
    func renewalsKeepTheHeapSmall() {
        var cache = LastValueCache(capacity: 1_001, defaultLease: .seconds(6))
        let start = ContinuousClock.now
        let ids = (0..<1_000).map { "a\($0)" }
        for id in ids { _ = cache.store(advertisement(id, leaseMs: 6_000), now: start) }
        var now = start
        for _ in 0..<30 {  // a minute of presence every 2 s
            now = now + .seconds(2)
            cache.renew(origin: "a", listed: Set(ids), partial: false, lease: .seconds(6), now: now)
            _ = cache.removeExpired(now: now)
        }
        #expect(cache.count == 1_000)
        #expect(cache.scheduled <= cache.count)  // one item each, where a push per renewal made 30,000
        // The oldest store is renewed: a new origin's activity evicts the one that really expires
        // soonest (short, stored last), not the first one stored.
        _ = cache.store(advertisement("short", origin: "b", leaseMs: 3_000), now: now)
        _ = cache.store(advertisement("c", origin: "c"), now: now)
        #expect(!cache.contains("short"))
        #expect(cache.contains("a0") && cache.contains("c"))
        // And they lapse once presence stops.
        do { let changed = cache.removeExpired(now: now + .seconds(7)); #expect(changed) }
        #expect(cache.count == 1)  // c, on its 60 s lease
    }
}

extension LastValueCache {
    /// Stores a message's advertisement, its fields read as the broker reads them.
    @discardableResult
    fileprivate mutating func store(_ frames: [Frame], now: ContinuousClock.Instant) -> Outcome {
        store(BrokerBusContent(frames).advertisement!, frames: frames, now: now)
    }
}
