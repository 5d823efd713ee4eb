import Foundation
import HandoffWire
import Testing

@testable import Handoff

@Suite("Discovery's known activities: leases, presence, quotas, without sockets")
struct KnownActivitiesTests {
    let now = ContinuousClock.now

    func activity(
        _ id: String, of origin: String = "node-a", key: UInt8? = nil, version: UInt64 = 1, expires: Date? = nil, title: String = "",
        type: String = "org.handoff.test.known", updated: Date? = nil
    ) -> DiscoveredActivity {
        var advertisement = WireAdvertisement()
        advertisement.activityID = id
        advertisement.title = title
        advertisement.activityType = type
        if let updated { advertisement.updatedAt = WireTimestamp(updated) }
        advertisement.origin.nodeID = origin
        advertisement.origin.name = origin
        if let key { advertisement.origin.publicKey = Data(repeating: key, count: 32) }
        advertisement.version = version
        advertisement.leaseMs = 6_000
        if let expires { advertisement.expiresAt = WireTimestamp(expires) }
        return DiscoveredActivity(wire: advertisement)
    }

    @Test("an activity appears, renews at the same version, updates at a newer one, and ignores an older one")
    func versions() {
        var known = KnownActivities(maxPerOrigin: 10, maxTotal: 10)
        #expect(known.arrive(activity("x", version: 2), deadline: now + .seconds(6), now: now) == .appeared)
        let later = now + .seconds(1)
        #expect(known.arrive(activity("x", version: 2), deadline: later + .seconds(6), now: later) == .renewed)
        #expect(known["x"]?.changed == now)  // renewing is not a change
        #expect(known["x"]?.deadline == later + .seconds(6))
        #expect(known.arrive(activity("x", version: 1), deadline: later + .seconds(9), now: later) == .stale)
        #expect(known["x"]?.deadline == later + .seconds(6))
        #expect(known.arrive(activity("x", version: 3), deadline: later + .seconds(6), now: later) == .updated)
        #expect(known["x"]?.changed == later)
        #expect(known["x"]?.activity.version == 3)
    }

    @Test("bounded in memory as well as in counts: a new activity, or a newer version, that would take the table past its bytes is ignored (the old version stays); a smaller version, or forgetting one, gives bytes back")
    func boundedInBytes() {
        let large = String(repeating: "t", count: 10_000)
        let one = activity("a0", title: large).footprint
        #expect(one > 10_000)
        var known = KnownActivities(maxPerOrigin: 100, maxTotal: 100, maxBytes: 3 * one + 100)
        for index in 0..<3 { #expect(known.arrive(activity("a\(index)", title: large), deadline: now, now: now) == .appeared) }
        #expect(known.bytes == 3 * one)
        #expect(known.arrive(activity("a3", title: large), deadline: now, now: now) == .overBytes(bytes: 3 * one))
        #expect(known.arrive(activity("a0", version: 2, title: large + large), deadline: now, now: now) == .overBytes(bytes: 3 * one))
        #expect(known["a0"]?.activity.version == 1 && known.bytes == 3 * one)
        // The same version again with larger strings (a peer that lies): counted as a newer one is.
        #expect(known.arrive(activity("a0", title: large + large), deadline: now, now: now) == .overBytes(bytes: 3 * one))
        #expect(known["a0"]?.activity.title == large && known.bytes == 3 * one)
        let small = activity("a0", version: 3, title: "small")
        #expect(known.arrive(small, deadline: now, now: now) == .updated)
        #expect(known.bytes == 2 * one + small.footprint)
        _ = known.remove("a1")
        #expect(known.arrive(activity("a3", title: large), deadline: now, now: now) == .appeared)
        _ = known.remove("a3")
        #expect(known.bytes == one + small.footprint && known.count == 2)
    }

    @Test("a key's quota holds over every node that names it; forgetting one of its activities makes room; nodes without a key are not counted by key")
    func keyQuota() {
        var known = KnownActivities(maxPerOrigin: 2, maxTotal: 100, maxPerKey: 3)
        #expect(known.arrive(activity("n1-a", of: "n1", key: 7), deadline: now, now: now) == .appeared)
        #expect(known.arrive(activity("n1-b", of: "n1", key: 7), deadline: now, now: now) == .appeared)
        #expect(known.arrive(activity("n2-a", of: "n2", key: 7), deadline: now, now: now) == .appeared)
        #expect(known.arrive(activity("n2-b", of: "n2", key: 7), deadline: now, now: now) == .overQuota(ofOrigin: 1, total: 3))
        #expect(known.arrive(activity("n3-a", of: "n3", key: 7), deadline: now, now: now) == .overQuota(ofOrigin: 0, total: 3))
        #expect(known.perKey[[UInt8](repeating: 7, count: 32)] == 3)
        // A newer version of one it holds still comes in.
        #expect(known.arrive(activity("n2-a", of: "n2", key: 7, version: 2), deadline: now, now: now) == .updated)
        #expect(known.arrive(activity("n4-a", of: "n4", key: 7), deadline: now, now: now) != .appeared)
        #expect(known.arrive(activity("n4-a", of: "n4", key: 8), deadline: now, now: now) == .appeared, "another key has its own quota")
        for node in ["n5", "n6"] {
            #expect(known.arrive(activity("\(node)-a", of: node), deadline: now, now: now) == .appeared, "no key, no key quota")
            #expect(known.arrive(activity("\(node)-b", of: node), deadline: now, now: now) == .appeared)
        }
        _ = known.remove("n1-a")
        #expect(known.arrive(activity("n1-c", of: "n1", key: 7), deadline: now, now: now) == .appeared, "forgetting one made room")
        #expect(known.perKey[[UInt8](repeating: 7, count: 32)] == 3)
    }

    @Test("quotas: per origin and in all, for new activities only; forgetting one makes room")
    func quotas() {
        var known = KnownActivities(maxPerOrigin: 2, maxTotal: 3)
        #expect(known.arrive(activity("a1"), deadline: now, now: now) == .appeared)
        #expect(known.arrive(activity("a2"), deadline: now, now: now) == .appeared)
        #expect(known.arrive(activity("a3"), deadline: now, now: now) == .overQuota(ofOrigin: 2, total: 2))
        #expect(known.arrive(activity("a2", version: 2), deadline: now, now: now) == .updated)  // known ones still change
        #expect(known.arrive(activity("b1", of: "node-b"), deadline: now, now: now) == .appeared)
        #expect(known.arrive(activity("c1", of: "node-c"), deadline: now, now: now) == .overQuota(ofOrigin: 0, total: 3))
        #expect(known.ids(ofOrigin: "node-c") == nil, "a refused origin leaves nothing behind (many of them would be memory)")
        #expect(known.remove("a1")?.id == "a1")
        #expect(known.remove("a1") == nil)
        #expect(known.arrive(activity("a3"), deadline: now, now: now) == .appeared)
        #expect(known.ids(ofOrigin: "node-a") == ["a2", "a3"])
    }

    @Test("presence renews the listed activities of its origin and hands back the unlisted, unless partial")
    func presence() {
        var known = KnownActivities(maxPerOrigin: 10, maxTotal: 10)
        for id in ["a1", "a2", "a3"] { _ = known.arrive(activity(id), deadline: now + .seconds(6), now: now) }
        _ = known.arrive(activity("b1", of: "node-b"), deadline: now + .seconds(6), now: now)
        let partial = known.renew(origin: "node-a", listed: ["a1"], partial: true, deadline: now + .seconds(12))
        #expect(partial.isEmpty)
        #expect(known["a1"]?.deadline == now + .seconds(12))
        #expect(known["a2"]?.deadline == now + .seconds(6))
        let whole = known.renew(origin: "node-a", listed: ["a1", "a2"], partial: false, deadline: now + .seconds(9))
        #expect(whole == ["a3"])  // withdrawn, and the withdrawal lost
        #expect(known["a1"]?.deadline == now + .seconds(12))  // a renewal never shortens a lease
        #expect(known.renew(origin: "node-z", listed: [], partial: false, deadline: now).isEmpty)
        #expect(known["b1"] != nil)
    }

    @Test("an activity is due when its lease runs out (lost) or its expiration date passes (expired)")
    func due() {
        var known = KnownActivities(maxPerOrigin: 10, maxTotal: 10)
        _ = known.arrive(activity("leased"), deadline: now + .seconds(1), now: now)
        _ = known.arrive(activity("dated", expires: Date(timeIntervalSinceNow: 60)), deadline: now + .seconds(100), now: now)
        _ = known.arrive(activity("kept"), deadline: now + .seconds(100), now: now)
        #expect(known.due(now: now, wallClock: Date()).isEmpty)
        let due = known.due(now: now + .seconds(2), wallClock: Date(timeIntervalSinceNow: 120))
        let reasons = Dictionary(uniqueKeysWithValues: due.map { ($0.id, $0.reason) })
        #expect(reasons == ["leased": .lost, "dated": .expired])
    }

    @Test("renewals cost the schedule nothing: a sweep finds only what came due, whatever was renewed meanwhile")
    func renewalsAndSweeps() {
        var known = KnownActivities(maxPerOrigin: 10_000, maxTotal: 10_000)
        let ids = (0..<1_000).map { "a\($0)" }
        for id in ids { _ = known.arrive(activity(id), deadline: now + .seconds(6), now: now) }
        // Presence every 2 s for a minute, listing all but the last ten.
        var clock = now
        for _ in 0..<30 {
            clock = clock + .seconds(2)
            _ = known.renew(origin: "node-a", listed: Set(ids.dropLast(10)), partial: true, deadline: clock + .seconds(6))
            let due = known.due(now: clock, wallClock: Date())
            for (id, _) in due { _ = known.remove(id) }
        }
        #expect(known.count == 990)
        #expect(known["a999"] == nil && known["a0"] != nil)
        // One item per entry, not one per renewal.
        #expect(known.scheduled <= known.count + 10)
        // And they all go once presence stops.
        let gone = known.due(now: clock + .seconds(7), wallClock: Date())
        #expect(gone.count == 990 && gone.allSatisfy { $0.reason == .lost })
    }

    @Test("a newer version with a shorter lease or an earlier expiration is looked at in time; a later one is not early")
    func rescheduled() {
        var known = KnownActivities(maxPerOrigin: 10, maxTotal: 10)
        let soon = Date(timeIntervalSinceNow: 30)
        _ = known.arrive(activity("x", version: 1), deadline: now + .seconds(60), now: now)
        _ = known.arrive(activity("y", version: 1, expires: soon.addingTimeInterval(60)), deadline: now + .seconds(100), now: now)
        _ = known.arrive(activity("z", version: 1, expires: soon), deadline: now + .seconds(100), now: now)
        #expect(known.arrive(activity("x", version: 2), deadline: now + .seconds(5), now: now) == .updated)
        #expect(known.arrive(activity("y", version: 2, expires: soon), deadline: now + .seconds(100), now: now) == .updated)
        #expect(known.arrive(activity("z", version: 2, expires: soon.addingTimeInterval(60)), deadline: now + .seconds(100), now: now) == .updated)
        let due = known.due(now: now + .seconds(10), wallClock: soon.addingTimeInterval(1))
        let reasons = Dictionary(uniqueKeysWithValues: due.map { ($0.id, $0.reason) })
        #expect(reasons == ["x": .lost, "y": .expired])
        #expect(known.due(now: now + .seconds(10), wallClock: soon.addingTimeInterval(61)).map(\.id) == ["z"])
    }

    @Test("an activity forgotten and heard of again is scheduled afresh; the old items do not touch it")
    func forgottenAndBack() {
        var known = KnownActivities(maxPerOrigin: 10, maxTotal: 10)
        _ = known.arrive(activity("x"), deadline: now + .seconds(1), now: now)
        _ = known.remove("x")
        _ = known.arrive(activity("x"), deadline: now + .seconds(60), now: now)
        #expect(known.due(now: now + .seconds(2), wallClock: Date()).isEmpty)
        #expect(known.due(now: now + .seconds(61), wallClock: Date()).map(\.id) == ["x"])
    }

    @Test("an activity whose lease ran out and whose expiration passed is due once, as lost")
    func lostBeforeExpired() {
        var known = KnownActivities(maxPerOrigin: 10, maxTotal: 10)
        _ = known.arrive(activity("x", expires: Date(timeIntervalSinceNow: 1)), deadline: now + .seconds(1), now: now)
        let due = known.due(now: now + .seconds(2), wallClock: Date(timeIntervalSinceNow: 2))
        #expect(due.count == 1 && due.first?.reason == .lost)
    }

    @Test("an activity that moves to another origin counts against the new one")
    func movedOrigin() {
        var known = KnownActivities(maxPerOrigin: 10, maxTotal: 10)
        _ = known.arrive(activity("x", of: "node-a"), deadline: now, now: now)
        #expect(known.arrive(activity("x", of: "node-b", version: 2), deadline: now, now: now) == .updated)
        #expect(known.ids(ofOrigin: "node-a") == nil)
        #expect(known.ids(ofOrigin: "node-b") == ["x"])
    }

    @Test("rule: the newest activity of a type is the one its originator made current or changed last (updatedAt), whatever order they were heard in; without that time, the one heard changing last; other types never count")
    func newest() {
        var known = KnownActivities(maxPerOrigin: 10, maxTotal: 10)
        let date = Date(timeIntervalSince1970: 2_000_000_000)
        #expect(known.newest(ofType: "org.handoff.test.known") == nil)
        _ = known.arrive(activity("later", version: 1, updated: date + 5), deadline: now + .seconds(6), now: now)
        // Heard after, with a higher version, but changed earlier by its originator's clock.
        _ = known.arrive(activity("earlier", version: 9, updated: date), deadline: now + .seconds(6), now: now + .seconds(1))
        _ = known.arrive(activity("other", type: "org.handoff.test.other", updated: date + 60), deadline: now + .seconds(6), now: now + .seconds(2))
        #expect(known.newest(ofType: "org.handoff.test.known")?.id == "later")
        var old = KnownActivities(maxPerOrigin: 10, maxTotal: 10)
        _ = old.arrive(activity("first"), deadline: now + .seconds(6), now: now)
        _ = old.arrive(activity("second"), deadline: now + .seconds(6), now: now + .seconds(1))
        _ = old.arrive(activity("first", version: 2), deadline: now + .seconds(6), now: now + .seconds(2))
        #expect(old.newest(ofType: "org.handoff.test.known")?.id == "first", "without updatedAt, the one heard changing last")
    }
}
