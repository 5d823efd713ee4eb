import Foundation
import HandoffWire
import Testing

@testable import Handoff

@Suite("Discovery's known activities: leases, presence, quotas, without sockets")
struct KnownActivitiesTests {
    let now = ContinuousClock.now

    func activity(_ id: String, of origin: String = "node-a", version: UInt64 = 1, expires: Date? = nil) -> DiscoveredActivity {
        var advertisement = WireAdvertisement()
        advertisement.activityID = id
        advertisement.activityType = "org.handoff.test.known"
        advertisement.origin.nodeID = origin
        advertisement.origin.name = origin
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

    @Test("quotas: per origin and in all, for new activities only; forgetting one makes room")
    func quotas() {
        var known = KnownActivities(maxPerOrigin: 2, maxTotal: 3)
        #expect(known.arrive(activity("a1"), deadline: now, now: now) == .appeared)
        #expect(known.arrive(activity("a2"), deadline: now, now: now) == .appeared)
        #expect(known.arrive(activity("a3"), deadline: now, now: now) == .overQuota(ofOrigin: 2, total: 2))
        #expect(known.arrive(activity("a2", version: 2), deadline: now, now: now) == .updated)  // known ones still change
        #expect(known.arrive(activity("b1", of: "node-b"), deadline: now, now: now) == .appeared)
        #expect(known.arrive(activity("c1", of: "node-c"), deadline: now, now: now) == .overQuota(ofOrigin: 0, total: 3))
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

    @Test("an activity that moves to another origin counts against the new one")
    func movedOrigin() {
        var known = KnownActivities(maxPerOrigin: 10, maxTotal: 10)
        _ = known.arrive(activity("x", of: "node-a"), deadline: now, now: now)
        #expect(known.arrive(activity("x", of: "node-b", version: 2), deadline: now, now: now) == .updated)
        #expect(known.ids(ofOrigin: "node-a") == nil)
        #expect(known.ids(ofOrigin: "node-b") == ["x"])
    }
}
