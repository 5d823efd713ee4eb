import Foundation
import HandoffWire
import Testing

@testable import Handoff

/// What the simulator's "ended-activity-forgotten" invariant rests on to skip most of a run's
/// history: an id absent from a table can appear in it only as an arrival that moves
/// ``KnownActivities/arrivals``; and the ledger that sets aside the activities nobody knows.
@Suite("The simulator's forgotten activities: set aside while no table takes in anything new")
struct ForgottenActivitiesTests {
    let now = ContinuousClock.now

    func activity(_ id: String, version: UInt64 = 1) -> DiscoveredActivity {
        var advertisement = WireAdvertisement()
        advertisement.activityID = id
        advertisement.activityType = "org.handoff.test.forgotten"
        advertisement.origin.nodeID = "node-a"
        advertisement.origin.name = "node-a"
        advertisement.version = version
        advertisement.leaseMs = 6_000
        return DiscoveredActivity(wire: advertisement)
    }

    @Test("arrivals move when an id comes into the table (new, or forgotten and back), not when one known is renewed, updated, stale or removed")
    func arrivalsMoveOnlyWhenAnIdComesIn() {
        var known = KnownActivities(maxPerOrigin: 10, maxTotal: 10)
        let deadline = now + .seconds(6)
        #expect(known.arrivals == 0)
        #expect(known.arrive(activity("x", version: 2), deadline: deadline, now: now) == .appeared)
        #expect(known.arrivals == 1)
        _ = known.arrive(activity("x", version: 2), deadline: deadline, now: now)  // renewed
        _ = known.arrive(activity("x", version: 3), deadline: deadline, now: now)  // updated
        _ = known.arrive(activity("x", version: 1), deadline: deadline, now: now)  // stale
        #expect(known.arrivals == 1)
        #expect(known.remove("x") != nil)
        #expect(known.arrivals == 1)
        #expect(known.arrive(activity("x", version: 3), deadline: deadline, now: now) == .appeared)
        #expect(known.arrivals == 2)
        #expect(known.arrive(activity("y"), deadline: deadline, now: now) == .appeared)
        #expect(known.arrivals == 3)
    }

    @Test("the ledger watches what the run makes, sets aside what is forgotten, names the tables that moved once each, and watches again in order")
    func ledger() {
        var ledger = ForgottenActivities()
        ledger.takeIn(upTo: 4)
        #expect(ledger.watched == [0, 1, 2, 3])
        ledger.setAside([1, 2])
        #expect(ledger.watched == [0, 3] && ledger.setAside == [1, 2])
        ledger.takeIn(upTo: 4)
        ledger.takeIn(upTo: 6)
        #expect(ledger.watched == [0, 3, 4, 5])
        // Every table has moved the first time; then only one that took something in, or a new process.
        let tables = [KnownArrivals(incarnation: 0, arrivals: 3), KnownArrivals(incarnation: 0, arrivals: 1)]
        #expect(ledger.tablesMoved(tables) == [0, 1])
        #expect(ledger.tablesMoved(tables).isEmpty)
        #expect(ledger.tablesMoved([tables[0], KnownArrivals(incarnation: 0, arrivals: 2)]) == [1])
        #expect(ledger.tablesMoved([KnownArrivals(incarnation: 1, arrivals: 0), KnownArrivals(incarnation: 0, arrivals: 2)]) == [0])
        ledger.watchAgain([2])
        #expect(ledger.watched == [0, 2, 3, 4, 5] && ledger.setAside == [1])
    }
}
