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
        #expect(r4 == nil)
        let r5 = resync.due(now: start + .seconds(1))
        #expect(r5 == .unheldIDs, "the round put off is for what the presence named")
        #expect(!resync.isDue)
    }

    @Test("ids a round did not bring are not followed here: the same presence does not ask again, until what the node follows changes")
    func unfollowedAreRemembered() {
        var resync = Resynchronization(interval: .seconds(1), capacity: 100)
        let r6 = resync.presence(origin: "a", listed: ["x", "y"], unheld: ["x", "y"], now: start)
        #expect(r6)
        // The snapshots brought y (a type followed here), not x.
        resync.settled(now: start) { $0 == "y" }
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
        resync.settled(now: start) { _ in false }
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
        resync.settled(now: start) { _ in false }
        #expect(resync.unfollowedIDs == 1)  // x only
        let r14 = resync.due(now: start + .seconds(1))
        #expect(r14 == .unheldIDs)
        resync.settled(now: start) { $0 == "z" }
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
        #expect(r17 == .reconnected)
    }

    @Test("ids waiting for a round, or asked in one a snapshot never answers, are bounded: a presence past the capacity still asks for a round, without its ids remembered")
    func roundsThatNeverSettleAreBounded() {
        var resync = Resynchronization(interval: .zero, capacity: 10)
        for round in 0..<20 {
            let ids = Set((0..<4).map { "\(round)-\($0)" })
            let asks = resync.presence(origin: "hostile", listed: ids, unheld: ids, now: start + .seconds(round))
            #expect(asks, "round \(round) was not asked for")
            #expect(resync.trackedIDs <= 10, "round \(round): \(resync.trackedIDs) ids tracked")
        }
        resync.settled(now: start) { _ in false }
        #expect(resync.trackedIDs == 0)
        resync.forget(origin: "hostile")
        #expect(resync.trackedIDs == 0 && resync.unfollowedIDs == 0)
    }

    @Test("a sender whose named ids a round brought none of asks for no round for 2 s, doubling to a minute; one it brought an id of is forgiven; others are not held back")
    func liarsHeldBack() {
        var resync = Resynchronization(interval: .seconds(1), capacity: 100)
        var rounds: [Int] = []
        // A member listing fresh made-up ids in a presence every 100 ms, under fresh origin ids, for five minutes.
        for tick in 0..<3_000 {
            let now = start + .milliseconds(tick * 100)
            if resync.due(now: now) != nil { rounds.append(tick) }
            let ids: Set<String> = ["fake-\(tick)"]
            if resync.presence(origin: "made-up-\(tick)", sender: "key L", listed: ids, unheld: ids, now: now) { rounds.append(tick) }
            if resync.inRound { resync.settled(now: now) { _ in false } }
        }
        // Every second without the hold: 300 rounds. With it: 2, 4, 8, 16, 32 s, then a minute each.
        #expect(rounds.count <= 12, "\(rounds.count) rounds at \(rounds)")
        let end = start + .seconds(300)
        #expect(resync.isHeldBack("key L", now: end))
        // Another sender's news still asks for a round at once.
        let honest = resync.presence(origin: "n1", sender: "key H", listed: ["lost"], unheld: ["lost"], now: end)
        #expect(honest)
        // A round that brings one of a sender's ids forgives it.
        resync.settled(now: end) { $0 == "lost" }
        #expect(!resync.isHeldBack("key H", now: end))
        var single = Resynchronization(interval: .zero, capacity: 100)
        _ = single.presence(origin: "o", listed: ["x"], unheld: ["x"], now: start)
        single.settled(now: start) { _ in false }
        #expect(single.isHeldBack("o", now: start + .seconds(1)) && !single.isHeldBack("o", now: start + .seconds(2)))
        let afterwards = single.presence(origin: "o", listed: ["x", "y"], unheld: ["y"], now: start + .seconds(2))
        #expect(afterwards)
        single.settled(now: start + .seconds(2)) { $0 == "y" }
        #expect(!single.isHeldBack("o", now: start + .seconds(2)))
    }

    @Test("a round judges each sender once, over all its origins (one brought: forgiven, whatever the order); what this node follows changing forgives every sender; a hold long over wears off")
    func senderJudgedOncePerRound() {
        var resync = Resynchronization(interval: .zero, capacity: 100)
        for origin in ["o1", "o2", "o3"] {
            _ = resync.presence(origin: origin, sender: "fleet", listed: [origin + "-x"], unheld: [origin + "-x"], now: start)
        }
        resync.settled(now: start) { $0 == "o2-x" }
        #expect(!resync.isHeldBack("fleet", now: start))
        for origin in ["o4", "o5", "o6"] {
            _ = resync.presence(origin: origin, sender: "fleet", listed: [origin + "-x"], unheld: [origin + "-x"], now: start + .seconds(1))
        }
        resync.settled(now: start + .seconds(1)) { _ in false }
        // One step (2 s), not three (2, 4, 8 s).
        #expect(resync.isHeldBack("fleet", now: start + .seconds(2)) && !resync.isHeldBack("fleet", now: start + .seconds(3) + .milliseconds(1)))
        resync.followingChanged()
        #expect(!resync.isHeldBack("fleet", now: start + .seconds(2)))
        // Five rounds bringing nothing, then a long quiet: the next starts again from 2 s.
        var worn = Resynchronization(interval: .zero, capacity: 100)
        for round in 0..<5 {
            let at = start + .seconds(round * 70)
            _ = worn.presence(origin: "w\(round)", sender: "w", listed: ["w\(round)-x"], unheld: ["w\(round)-x"], now: at)
            worn.settled(now: at) { _ in false }
            #expect(!worn.isHeldBack("w", now: at + .seconds(2) + .milliseconds(1)), "round \(round): 2 s again after a hold long over")
        }
    }

    @Test("an id this node held and let lapse asks for a round when its origin lists it again, from a sender held back too, once per lapse; the origin's other ids do not")
    func lapsedIdsAskDespiteHold() {
        var resync = Resynchronization(interval: .zero, capacity: 100)
        // A round for an id of a type not followed here brings nothing: the origin's sender held back.
        let first = resync.presence(origin: "n3", listed: ["other"], unheld: ["other"], now: start)
        #expect(first)
        resync.settled(now: start) { _ in false }
        #expect(resync.isHeldBack("n3", now: start + .seconds(1)))
        // An activity held here lapses while its origin is stopped; the origin's presence lapses too.
        resync.lapsed("a22", origin: "n3", now: start + .milliseconds(500))
        resync.forget(origin: "n3")
        #expect(resync.lapsedIDs == 1)
        // It goes on: its presence lists a22 again, asked for despite the hold; "other" is not.
        let back = resync.presence(origin: "n3", listed: ["other", "a22"], unheld: ["other", "a22"], now: start + .seconds(1))
        #expect(back)
        #expect(resync.trackedIDs == 1)
        #expect(resync.lapsedIDs == 0)
        // The round brings it: the sender forgiven.
        resync.settled(now: start + .seconds(1)) { $0 == "a22" }
        #expect(!resync.isHeldBack("n3", now: start + .seconds(1)))

        // A lapsed id a round then did not bring (its origin stopped again) asks no more while held.
        var once = Resynchronization(interval: .zero, capacity: 100)
        _ = once.presence(origin: "o", listed: ["x"], unheld: ["x"], now: start)
        once.settled(now: start) { _ in false }
        once.lapsed("y", origin: "o", now: start)
        let asked = once.presence(origin: "o", listed: ["x", "y"], unheld: ["x", "y"], now: start + .milliseconds(100))
        #expect(asked)
        once.settled(now: start + .milliseconds(100)) { _ in false }
        let again = once.presence(origin: "o", listed: ["x", "y"], unheld: ["x", "y"], now: start + .milliseconds(200))
        #expect(!again)
    }

    @Test("an id a round did not bring, then held (its refresh arrived) and let lapse, is no longer taken as not followed here")
    func lapseUndoesUnfollowed() {
        var resync = Resynchronization(interval: .zero, capacity: 100)
        _ = resync.presence(origin: "o", listed: ["y"], unheld: ["y"], now: start)
        resync.settled(now: start) { _ in false }
        #expect(resync.unfollowedIDs == 1)
        resync.lapsed("y", origin: "o", now: start + .seconds(100))
        #expect(resync.unfollowedIDs == 0)
        let asked = resync.presence(origin: "o", listed: ["y"], unheld: ["y"], now: start + .seconds(101))
        #expect(asked)
    }

    @Test("lapsed ids are bounded: past the capacity, the origins that lapsed longest ago go first, down to three quarters of it; an origin's presence spends its memory")
    func lapsedBounded() {
        var lapsed = LapsedIDs(capacity: 4)
        for origin in 0..<3 {
            for id in 0..<2 { lapsed.lapsed("\(origin)-\(id)", origin: "o\(origin)", now: start + .seconds(origin)) }
        }
        #expect(lapsed.count == 4)
        #expect(!lapsed.contains("0-0", origin: "o0") && lapsed.contains("1-0", origin: "o1") && lapsed.contains("2-1", origin: "o2"))
        let relisted = lapsed.relisted(origin: "o2", unheld: ["2-0", "elsewhere"])
        #expect(relisted == ["2-0"])
        #expect(lapsed.count == 2 && !lapsed.contains("2-1", origin: "o2"))
    }

    @Test("the memory of unfollowed ids is bounded: past its capacity it starts over")
    func bounded() {
        var resync = Resynchronization(interval: .zero, capacity: 10)
        for round in 0..<5 {
            let ids = Set((0..<4).map { "\(round)-\($0)" })
            let r18 = resync.presence(origin: "o\(round)", listed: ids, unheld: ids, now: start + .seconds(round))
            #expect(r18)
            resync.settled(now: start) { _ in false }
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
        let r20 = requests.decide("a", now: now, everyoneAllowed: true)
        #expect(r20 == .origin)
        let r21 = requests.decide("a", now: now + .milliseconds(999), everyoneAllowed: true)
        #expect(r21 == .none)
        let r22 = requests.decide("b", now: now, everyoneAllowed: true)
        #expect(r22 == .origin)
        let r23 = requests.decide("a", now: now + .seconds(1), everyoneAllowed: true)
        #expect(r23 == .origin)
        // Past its capacity the memory starts over: bounded whatever the number of origins.
        let r24 = requests.decide("c", now: now + .seconds(1), everyoneAllowed: true)
        #expect(r24 == .origin)
        let r25 = cache.renew(origin: "a", listed: ["1", "2", "3", "4", "5"], partial: false, lease: .seconds(6), now: now)
        #expect(r25 == 3)
    }

    @Test("a broker asks at most 8 origins a second to advertise again; when more lack at once, every publisher at once, at most every 10 s, and never for another site's nodes")
    func readvertiseRequestsBudgeted() {
        let now = ContinuousClock.now
        var requests = ReadvertiseRequests()
        let first = (0..<8).map { requests.decide("o\($0)", now: now, everyoneAllowed: true) }
        #expect(first.allSatisfy { $0 == .origin })
        // The ninth in the same second: too many to ask one by one (each reaches every publisher).
        let ninth = requests.decide("o8", now: now + .milliseconds(10), everyoneAllowed: true)
        let tenth = requests.decide("o9", now: now + .milliseconds(20), everyoneAllowed: true)
        #expect(ninth == .everyone && tenth == .none)
        // A new second: one by one again, but no second subscribe-all within 10 s.
        let later = (10..<19).map { requests.decide("o\($0)", now: now + .seconds(2), everyoneAllowed: true) }
        #expect(later.filter { $0 == .origin }.count == 8 && later.last == Decision.none)
        let past = (20..<29).map { requests.decide("o\($0)", now: now + .seconds(11), everyoneAllowed: true) }
        #expect(past.last == .everyone)
        // Nodes of other sites (their presences came down from upstream): a subscribe-all here
        // does not reach them.
        var upstream = ReadvertiseRequests()
        let asked = (0..<9).map { upstream.decide("u\($0)", now: now, everyoneAllowed: false) }
        #expect(asked.last == Decision.none && upstream.decide("u0", now: now + .seconds(1), everyoneAllowed: false) == .origin)
    }

    private typealias Decision = ReadvertiseRequests.Decision
}
