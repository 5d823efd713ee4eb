import Testing
@testable import Handoff

@Suite("The originating side's current activities, without sockets")
struct CurrentActivitiesTests {
    @Test("invalidated and expired activities are remembered as ended with their reason; resigned ones are not; becoming current again clears it")
    func endedReasons() throws {
        var current = CurrentActivities()
        let (a, b, c) = (try UserActivity(activityType: "org.handoff.test.a"), try UserActivity(activityType: "org.handoff.test.b"),
                         try UserActivity(activityType: "org.handoff.test.c"))
        for activity in [a, b, c] { current.add(activity) }
        #expect(current.count == 3)
        let removed = [current.remove(a.id, reason: .invalidated), current.remove(b.id, reason: .expired),
                       current.remove(c.id, reason: .resigned), current.remove(c.id, reason: .resigned)]
        #expect(removed == [true, true, true, false], "the last: not current any more")
        #expect(current.endedReason(a.id) == .activityInvalidated)
        #expect(current.endedReason(b.id) == .activityExpired)
        #expect(current.endedReason(c.id) == nil)
        current.add(b)
        #expect(current.endedReason(b.id) == nil)
        #expect(current[b.id] === b)
        current.markEnded(c.id, .alreadyContinued)
        #expect(current.endedReason(c.id) == .alreadyContinued)
        let left = current.removeAll().map(\.id)
        #expect(left == [b.id])
        #expect(current.count == 0)
    }

    @Test("the ended record is bounded: the oldest are forgotten first")
    func bounded() {
        var current = CurrentActivities()
        let total = CurrentActivities.endedCapacity + 5
        for index in 0..<total { current.markEnded("ended-\(index)", .activityInvalidated) }
        #expect(current.endedReason("ended-0") == nil)
        #expect(current.endedReason("ended-4") == nil)
        #expect(current.endedReason("ended-5") == .activityInvalidated)
        #expect(current.endedReason("ended-\(total - 1)") == .activityInvalidated)
    }
}
