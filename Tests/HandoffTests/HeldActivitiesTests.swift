import Testing

@testable import Handoff

@Suite("The continuation client's held activities (did-update), without sockets")
struct HeldActivitiesTests {
    @Test("a newer advertisement starts one fetch; another waits until it ends")
    func oneFetchAtATime() {
        var held = HeldActivities()
        let start = ContinuousClock.now
        held.hold("a", version: 3)
        let answer1 = held.beginRefresh("a", advertised: 3, now: start)
        #expect(!answer1)  // not newer
        let answer2 = held.beginRefresh("b", advertised: 9, now: start)
        #expect(!answer2)  // not held
        let answer3 = held.beginRefresh("a", advertised: 4, now: start)
        #expect(answer3)
        let answer4 = held.beginRefresh("a", advertised: 5, now: start)
        #expect(!answer4)  // one runs
        let answer5 = held.accept("a", fetched: 5)
        #expect(answer5)  // it fetched the newest: news
        held.endRefresh("a")
        #expect(held.version(of: "a") == 5)
        let answer6 = held.beginRefresh("a", advertised: 5, now: start)
        #expect(!answer6)  // already told
        let answer7 = held.beginRefresh("a", advertised: 6, now: start)
        #expect(answer7)
    }

    @Test("a fetch that brings nothing newer, or fails, tells nothing and lets the next one start")
    func staleOrFailed() {
        var held = HeldActivities()
        let start = ContinuousClock.now
        held.hold("a", version: 3)
        let answer8 = held.beginRefresh("a", advertised: 4, now: start)
        #expect(answer8)
        let answer9 = held.accept("a", fetched: 3)
        #expect(!answer9)  // the originator answered with an older state
        held.endRefresh("a")
        #expect(held.version(of: "a") == 3)
        let answer10 = held.beginRefresh("a", advertised: 4, now: start)
        #expect(answer10)
        held.endRefresh("a")
        let answer11 = held.beginRefresh("a", advertised: 4, now: start)
        #expect(answer11)
    }

    @Test("a fetch that failed is tried again a second later while a newer version is still known, and not before; a newer advertisement meanwhile waits for it too")
    func failedFetchRetried() {
        var held = HeldActivities()
        let start = ContinuousClock.now
        held.hold("a", version: 3)
        held.hold("b", version: 1)
        let first = held.beginRefresh("a", advertised: 4, now: start)
        #expect(first)
        held.endRefresh("a", failed: start)
        let known: (String) -> UInt64? = { ["a": 4, "b": 1][$0] }
        #expect(held.dueRetries(now: start + .milliseconds(999), knownVersion: known).isEmpty)
        let again = held.beginRefresh("a", advertised: 5, now: start + .milliseconds(500))
        #expect(!again)  // the retry delay holds for a newer version too
        #expect(held.dueRetries(now: start + HeldActivities.retryDelay, knownVersion: known) == ["a"])
        #expect(held.dueRetries(now: start + .seconds(5), knownVersion: { _ in 3 }).isEmpty)  // nothing newer known any more
        let retried = held.beginRefresh("a", advertised: 4, now: start + HeldActivities.retryDelay)
        #expect(retried)
        #expect(held.dueRetries(now: start + .seconds(5), knownVersion: known).isEmpty)  // it runs
        let told = held.accept("a", fetched: 4)
        #expect(told)
        held.endRefresh("a")
        #expect(held.dueRetries(now: start + .seconds(5), knownVersion: known).isEmpty)  // told
    }

    @Test("a fetch is tried again only when the way failed (unreachable, timed out, connection lost), not when the originator answered no")
    func retriedOnlyOnTheWay() {
        for code in [HandoffError.Code.connectionUnavailable, .remoteApplicationTimedOut, .peerLost] {
            #expect(HeldActivities.worthRetrying(code), "\(code)")
        }
        for code in [HandoffError.Code.activityNotFound, .activityExpired, .activityInvalidated, .unauthorized, .declined, .userInfoTooLarge] {
            #expect(!HeldActivities.worthRetrying(code), "\(code)")
        }
        // refreshFailed applies it: a failure on the way is due again after the delay, a refusal never.
        var held = HeldActivities()
        let start = ContinuousClock.now
        held.hold("a", version: 1)
        held.hold("b", version: 1)
        _ = held.beginRefresh("a", advertised: 2, now: start)
        _ = held.beginRefresh("b", advertised: 2, now: start)
        let retried = held.refreshFailed("a", with: .remoteApplicationTimedOut, now: start)
        let refused = held.refreshFailed("b", with: .activityNotFound, now: start)
        #expect(retried && !refused)
        #expect(held.dueRetries(now: start + HeldActivities.retryDelay, knownVersion: { _ in 2 }) == ["a"])
    }

    @Test("continuing again keeps the newest version; an activity that left the bus is let go")
    func holdAndRelease() {
        var held = HeldActivities()
        held.hold("a", version: 7)
        held.hold("a", version: 2)
        #expect(held.version(of: "a") == 7)
        held.hold("a", version: 8)
        #expect(held.version(of: "a") == 8)
        held.release("a")
        #expect(held.version(of: "a") == nil)
        let answer12 = held.accept("a", fetched: 9)
        #expect(!answer12)
        #expect(held.count == 0)
    }

    @Test("a continue that ends holding v2 fetches at once the v3 heard while its request was under way (no fetch started then: nothing was held); none when nothing newer is known, or the activity left the bus")
    func continueEndsHoldingAnOlderVersion() {
        var held = HeldActivities()
        let now = ContinuousClock.now
        let heardMeanwhile = held.continued("a", version: 2, known: 3, now: now)
        #expect(heardMeanwhile)
        #expect(held.version(of: "a") == 2 && held.isRefreshing("a"))
        let upToDate = held.continued("b", version: 4, known: 4, now: now)
        #expect(!upToDate)
        #expect(held.version(of: "b") == 4 && !held.isRefreshing("b"))
        let gone = held.continued("c", version: 1, known: nil, now: now)
        #expect(!gone)
        #expect(held.version(of: "c") == nil)
    }

    @Test("a fetch that ends while a newer version was heard meanwhile starts the next at once; none when the told version is the newest, or the activity left the bus")
    func refreshEndsWithANewerVersionKnown() {
        var held = HeldActivities()
        let now = ContinuousClock.now
        held.hold("a", version: 1)
        let first = held.beginRefresh("a", advertised: 2, now: now)
        #expect(first)
        let told = held.accept("a", fetched: 2)
        #expect(told)
        let next = held.refreshEnded("a", known: 3, now: now)
        #expect(next)
        #expect(held.isRefreshing("a"))
        let toldAgain = held.accept("a", fetched: 3)
        #expect(toldAgain)
        let newest = held.refreshEnded("a", known: 3, now: now)
        #expect(!newest)
        #expect(!held.isRefreshing("a"))
        let third = held.beginRefresh("a", advertised: 4, now: now)
        #expect(third)
        let left = held.refreshEnded("a", known: nil, now: now)
        #expect(!left)
        #expect(!held.isRefreshing("a"))
    }
}
