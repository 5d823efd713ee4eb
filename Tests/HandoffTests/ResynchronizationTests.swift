import Foundation
import Testing

@testable import Handoff

/// When a follower asks for its snapshots again, decided with no socket and no clock.
@Suite("Resynchronization: asking again for what the bus lost")
struct ResynchronizationTests {
    let start = ContinuousClock.now

    @Test("a presence naming an activity not held asks at once; another within the interval waits for the tick after it")
    func presenceAsksOncePerInterval() {
        var resync = Resynchronization(interval: .seconds(1), capacity: 100)
        let r1 = resync.presence(origin: "a", listed: ["x"], unheld: ["x"], now: start)
        #expect(r1)
        #expect(resync.inRound)
        // The same id again while its round is under way: nothing new.
        let r2 = resync.presence(origin: "a", listed: ["x"], unheld: ["x"], now: start + .milliseconds(10))
        #expect(!r2)
        #expect(!resync.isDue)
        // Another id within the interval: due, not asked yet.
        let r3 = resync.presence(origin: "b", listed: ["y"], unheld: ["y"], now: start + .milliseconds(100))
        #expect(!r3)
        #expect(resync.isDue)
        let r4 = resync.due(now: start + .milliseconds(900))
        #expect(!r4)
        let r5 = resync.due(now: start + .seconds(1))
        #expect(r5)
        #expect(!resync.isDue)
    }

    @Test("ids a round did not bring are not followed here: the same presence does not ask again, until what the node follows changes")
    func unfollowedAreRemembered() {
        var resync = Resynchronization(interval: .seconds(1), capacity: 100)
        let r6 = resync.presence(origin: "a", listed: ["x", "y"], unheld: ["x", "y"], now: start)
        #expect(r6)
        // The snapshots brought y (a type followed here), not x.
        resync.settled { $0 == "y" }
        #expect(resync.unfollowedIDs == 1)
        let r7 = resync.presence(origin: "a", listed: ["x", "y"], unheld: ["x"], now: start + .seconds(5))
        #expect(!r7)
        #expect(!resync.isDue)
        resync.followingChanged()
        let r8 = resync.presence(origin: "a", listed: ["x", "y"], unheld: ["x"], now: start + .seconds(6))
        #expect(r8)
    }

    @Test("an id the origin no longer lists is forgotten; a lost one it lists again asks again")
    func unlistedIdsAreForgotten() {
        var resync = Resynchronization(interval: .seconds(1), capacity: 100)
        let r9 = resync.presence(origin: "a", listed: ["x"], unheld: ["x"], now: start)
        #expect(r9)
        resync.settled { _ in false }
        #expect(resync.unfollowedIDs == 1)
        let r10 = resync.presence(origin: "a", listed: [], unheld: [], now: start + .seconds(2))
        #expect(!r10)
        #expect(resync.unfollowedIDs == 0)
        let r11 = resync.presence(origin: "a", listed: ["x"], unheld: ["x"], now: start + .seconds(4))
        #expect(r11)
    }

    @Test("an id that arrives while a round is under way is asked about in the next round, not marked by this one")
    func idsDuringARoundWaitForTheNext() {
        var resync = Resynchronization(interval: .seconds(1), capacity: 100)
        let r12 = resync.presence(origin: "a", listed: ["x"], unheld: ["x"], now: start)
        #expect(r12)
        let r13 = resync.presence(origin: "a", listed: ["x", "z"], unheld: ["x", "z"], now: start + .milliseconds(200))
        #expect(!r13)
        resync.settled { _ in false }
        #expect(resync.unfollowedIDs == 1)  // x only
        let r14 = resync.due(now: start + .seconds(1))
        #expect(r14)
        resync.settled { $0 == "z" }
        #expect(resync.unfollowedIDs == 1)
    }

    @Test("a bus connection that comes back asks at once, within the interval after a round only once it has passed")
    func reconnectAsks() {
        var resync = Resynchronization(interval: .seconds(1), capacity: 100)
        let r15 = resync.reconnected(now: start)
        #expect(r15)
        let r16 = resync.reconnected(now: start + .milliseconds(500))
        #expect(!r16)
        let r17 = resync.due(now: start + .seconds(1))
        #expect(r17)
    }

    @Test("the memory of unfollowed ids is bounded: past its capacity it starts over")
    func bounded() {
        var resync = Resynchronization(interval: .zero, capacity: 10)
        for round in 0..<5 {
            let ids = Set((0..<4).map { "\(round)-\($0)" })
            let r18 = resync.presence(origin: "o\(round)", listed: ids, unheld: ids, now: start + .seconds(round))
            #expect(r18)
            resync.settled { _ in false }
            #expect(resync.unfollowedIDs <= 10)
        }
        resync.forget(origin: "o4")
        #expect(resync.unfollowedIDs <= 6)
    }

    @Test("the broker's cache says how many listed activities it lacks, within the origin's quota; a broker asks an origin at most once a second")
    func cacheLacksAndRequests() throws {
        var cache = LastValueCache(capacity: 100, perOriginQuota: 3, defaultLease: .seconds(6))
        let now = ContinuousClock.now
        let r19 = cache.renew(origin: "a", listed: ["1", "2"], partial: false, lease: .seconds(6), now: now)
        #expect(r19 == 2)
        var requests = ReadvertiseRequests(interval: .seconds(1), capacity: 2)
        let r20 = requests.shouldAsk("a", now: now)
        #expect(r20)
        let r21 = requests.shouldAsk("a", now: now + .milliseconds(999))
        #expect(!r21)
        let r22 = requests.shouldAsk("b", now: now)
        #expect(r22)
        let r23 = requests.shouldAsk("a", now: now + .seconds(1))
        #expect(r23)
        // Past its capacity the memory starts over: bounded whatever the number of origins.
        let r24 = requests.shouldAsk("c", now: now + .seconds(1))
        #expect(r24)
        let r25 = cache.renew(origin: "a", listed: ["1", "2", "3", "4", "5"], partial: false, lease: .seconds(6), now: now)
        #expect(r25 == 3)
    }
}
