import Foundation
import Testing

@testable import Handoff

@Suite("The continuation server's checks of a request, without sockets")
struct ContinueRequestCheckTests {
    func check(_ id: String, type: String = "org.handoff.test.check", in current: CurrentActivities, now: Date = Date()) -> ContinueRequestCheck {
        ContinueRequestCheck.check(activityID: id, activityType: type, in: current, node: "desk", now: now)
    }

    @Test("a current activity is answered; an unknown one is not found, naming the node")
    func currentOrNot() throws {
        var current = CurrentActivities()
        let activity = try UserActivity(activityType: "org.handoff.test.check")
        current.add(activity)
        #expect(check(activity.id, in: current) == .answer(activity))
        guard case .refuse(let error) = check("nope", in: current) else { Issue.record("not refused"); return }
        #expect(error.code == .activityNotFound)
        #expect(error.message == "desk has no current activity nope")
    }

    @Test("an activity that ended recently is refused with why it ended")
    func ended() throws {
        var current = CurrentActivities()
        let (invalidated, expired, continued) = (try UserActivity(activityType: "org.handoff.test.a"),
                                                 try UserActivity(activityType: "org.handoff.test.b"),
                                                 try UserActivity(activityType: "org.handoff.test.c"))
        for activity in [invalidated, expired, continued] { current.add(activity) }
        _ = current.remove(invalidated.id, reason: .invalidated)
        _ = current.remove(expired.id, reason: .expired)
        _ = current.remove(continued.id, reason: .resigned)
        current.markEnded(continued.id, .alreadyContinued)
        let codes = [invalidated, expired, continued].map { activity -> HandoffError.Code? in
            guard case .refuse(let error) = check(activity.id, type: activity.activityType, in: current) else { return nil }
            return error.code
        }
        #expect(codes == [.activityInvalidated, .activityExpired, .alreadyContinued])
    }

    @Test("not eligible for Handoff reads as not found; a passed expiration date is taken out")
    func eligibilityAndExpiration() throws {
        var current = CurrentActivities()
        let hidden = try UserActivity(activityType: "org.handoff.test.hidden")
        hidden.isEligibleForHandoff = false
        let dated = try UserActivity(activityType: "org.handoff.test.dated")
        let expiration = Date(timeIntervalSinceNow: 60)
        dated.expirationDate = expiration
        current.add(hidden)
        current.add(dated)
        guard case .refuse(let error) = check(hidden.id, type: hidden.activityType, in: current) else { Issue.record("not refused"); return }
        #expect(error.code == .activityNotFound)
        #expect(error.message.contains("eligibleForHandoff is off"))
        #expect(check(dated.id, type: dated.activityType, in: current) == .answer(dated))
        guard case .expired(let found, let expiredError) = check(dated.id, type: dated.activityType, in: current, now: expiration.addingTimeInterval(1)) else {
            Issue.record("not expired")
            return
        }
        #expect(found === dated)
        #expect(expiredError.code == .activityExpired)
    }

    @Test("a request naming another type than the activity's is refused as an invalid activity type, not answered")
    func wrongType() throws {
        var current = CurrentActivities()
        let activity = try UserActivity(activityType: "org.handoff.test.check")
        current.add(activity)
        for type in ["org.handoff.test.other", "org.handoff.test", "org.handoff.test.check.more", ""] {
            guard case .refuse(let error) = check(activity.id, type: type, in: current) else {
                Issue.record("a request for type \"\(type)\" was not refused")
                continue
            }
            #expect(error.code == .invalidActivityType)
            #expect(error.message.contains("is of type org.handoff.test.check"))
        }
        #expect(check(activity.id, type: "org.handoff.test.check", in: current) == .answer(activity))
    }

    @Test("ids and types over the contract's lengths are malformed, and not repeated back")
    func oversized() {
        let long = String(repeating: "x", count: WireLimits.maxActivityID + 1)
        guard case .refuse(let error) = check(long, in: CurrentActivities()) else { Issue.record("not refused"); return }
        #expect(error.code == .malformedMessage)
        #expect(!error.message.contains(long))
    }
}
