import Testing

@testable import Handoff

@Suite("The continuation client's held activities (did-update), without sockets")
struct HeldActivitiesTests {
    @Test("a newer advertisement starts one fetch; another waits until it ends")
    func oneFetchAtATime() {
        var held = HeldActivities()
        held.hold("a", version: 3)
        let answer1 = held.beginRefresh("a", advertised: 3)
        #expect(!answer1)  // not newer
        let answer2 = held.beginRefresh("b", advertised: 9)
        #expect(!answer2)  // not held
        let answer3 = held.beginRefresh("a", advertised: 4)
        #expect(answer3)
        let answer4 = held.beginRefresh("a", advertised: 5)
        #expect(!answer4)  // one runs
        let answer5 = held.accept("a", fetched: 5)
        #expect(answer5)  // it fetched the newest: news
        held.endRefresh("a")
        #expect(held.version(of: "a") == 5)
        let answer6 = held.beginRefresh("a", advertised: 5)
        #expect(!answer6)  // already told
        let answer7 = held.beginRefresh("a", advertised: 6)
        #expect(answer7)
    }

    @Test("a fetch that brings nothing newer, or fails, tells nothing and lets the next one start")
    func staleOrFailed() {
        var held = HeldActivities()
        held.hold("a", version: 3)
        let answer8 = held.beginRefresh("a", advertised: 4)
        #expect(answer8)
        let answer9 = held.accept("a", fetched: 3)
        #expect(!answer9)  // the originator answered with an older state
        held.endRefresh("a")
        #expect(held.version(of: "a") == 3)
        let answer10 = held.beginRefresh("a", advertised: 4)
        #expect(answer10)  // a failure ends the same way
        held.endRefresh("a")
        let answer11 = held.beginRefresh("a", advertised: 4)
        #expect(answer11)
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
}
