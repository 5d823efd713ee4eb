import Foundation
import Testing

@testable import Handoff

@Suite("The node's stream table, without sockets")
struct StreamTableTests {
    static let start = ContinuousClock.now
    final class Pair: StreamTableEntry {
        let key: StreamKey
        var route: StreamRoute
        let owner: String
        let isContinuer: Bool
        var resumeToken: Data
        var failedAt: ContinuousClock.Instant?
        var waitsOnPeer = true
        var peersTurnSince = StreamTableTests.start

        init(_ key: StreamKey, _ route: StreamRoute, owner: String, isContinuer: Bool = false, token: Data = Data()) {
            self.key = key
            self.route = route
            self.owner = owner
            self.isContinuer = isContinuer
            self.resumeToken = token
        }
    }

    func accepted(_ table: inout StreamTable<Pair>, from peer: [UInt8], id: UInt64, owner: String, token: Data = Data([1])) -> Pair {
        let pair = Pair(table.newKey(), StreamRoute(peer: .router(peer), id: id), owner: owner, token: token)
        table.insert(pair)
        return pair
    }

    @Test("frames find the live pair by route; a failed pair no longer receives them, but its route stays taken")
    func routes() {
        var table = StreamTable<Pair>()
        let pair = accepted(&table, from: [1], id: 7, owner: "alice")
        let route = StreamRoute(peer: .router([1]), id: 7)
        #expect(table.live(on: route) === pair)
        #expect(table[pair.key] === pair)
        #expect(table.live(on: StreamRoute(peer: .router([2]), id: 7)) == nil)
        pair.failedAt = StreamTableTests.start
        #expect(table.live(on: route) == nil)
        #expect(table.isTaken(route))  // a repeated open of it is not a new pair
        table.remove(pair)
        #expect(!table.isTaken(route))
        #expect(table.count == 0)
    }

    @Test("keys and the wire ids of pairs this node opens are never reused")
    func freshIdentifiers() {
        var table = StreamTable<Pair>()
        let keys = (0..<100).map { _ in table.newKey() }
        let ids = (0..<100).map { _ in table.newRouteID() }
        #expect(Set(keys).count == 100)
        #expect(Set(ids).count == 100)
        table.removeAll()
        #expect(!keys.contains(table.newKey()))
    }

    @Test("limits: per node and per peer count live pairs only, and say which limit refused")
    func admission() {
        var table = StreamTable<Pair>()
        let first = accepted(&table, from: [1], id: 1, owner: "alice")
        _ = accepted(&table, from: [1], id: 2, owner: "alice")
        _ = accepted(&table, from: [2], id: 1, owner: "bob")
        #expect(table.admission(owner: "alice", maxStreams: 10, maxStreamsPerPeer: 2) == .peerFull(fromPeer: 2))
        #expect(table.admission(owner: "bob", maxStreams: 10, maxStreamsPerPeer: 2) == .admitted)
        #expect(table.admission(owner: "carol", maxStreams: 3, maxStreamsPerPeer: 2) == .nodeFull(open: 3, fromPeer: 0))
        #expect(table.admission(owner: "alice", maxStreams: 3, maxStreamsPerPeer: 5) == .nodeFull(open: 3, fromPeer: 2))
        first.failedAt = StreamTableTests.start
        #expect(table.admission(owner: "alice", maxStreams: 10, maxStreamsPerPeer: 2) == .admitted)
        #expect(table.admission(owner: "carol", maxStreams: 3, maxStreamsPerPeer: 2) == .admitted)
        #expect(table.liveCount == 2)
        #expect(table.count == 3)
    }

    @Test("a resume finds the originator's pair by wire id and token only, and moves it to its new connection")
    func resume() {
        var table = StreamTable<Pair>()
        let pair = accepted(&table, from: [1], id: 5, owner: "alice", token: Data([9, 9]))
        let unanswered = accepted(&table, from: [1], id: 6, owner: "alice", token: Data())
        #expect(table.resumable(id: 5, token: Data([9, 9])) === pair)
        #expect(table.resumable(id: 5, token: Data([9, 8])) == nil)  // a guessed token
        #expect(table.resumable(id: 6, token: Data()) == nil)  // no token yet: nothing to resume
        _ = unanswered

        let newRoute = StreamRoute(peer: .router([3]), id: 5)
        table.move(pair, to: newRoute)
        #expect(pair.route == newRoute)
        #expect(table.live(on: newRoute) === pair)
        #expect(table.live(on: StreamRoute(peer: .router([1]), id: 5)) == nil)

        pair.failedAt = StreamTableTests.start
        #expect(table.resumable(id: 5, token: Data([9, 9])) == nil)  // a failed pair is not resumed
    }

    @Test("rule: a resume of no pair (ended, past its window, a wrong token) is answered with peerLost naming the pair and the window, so that the peer stops trying")
    func unresumable() throws {
        var table = StreamTable<Pair>()
        let pair = accepted(&table, from: [1], id: 5, owner: "alice", token: Data([9, 9]))
        guard case .success(let found) = table.resumeTarget(id: 5, token: Data([9, 9]), node: "desk", resumeWindow: .seconds(30)) else {
            Issue.record("a live pair with its token was not found")
            return
        }
        #expect(found === pair)
        let other = accepted(&table, from: [1], id: 6, owner: "alice", token: Data([7, 7]))
        other.failedAt = StreamTableTests.start  // it ended (or its resume window passed: the pair failed then)
        // A wrong token, a pair that ended, and an id no pair ever had: each answered with peerLost.
        for (id, token) in [(UInt64(5), Data([9, 8])), (6, Data([7, 7])), (9, Data([9, 9]))] {
            guard case .failure(let error) = table.resumeTarget(id: id, token: token, node: "desk", resumeWindow: .seconds(30)) else {
                Issue.record("pair \(id) was resumed with token \(Array(token))")
                continue
            }
            #expect(error.code == .peerLost && error.message.hasPrefix("desk has no stream pair \(id) to resume"))
            #expect(error.message.contains("resume window (\(Duration.seconds(30))) passed"), "\(error.message)")
        }
    }

    @Test("a route another pair took since is not freed when the old pair goes")
    func routeTakenOver() {
        var table = StreamTable<Pair>()
        let old = accepted(&table, from: [1], id: 5, owner: "alice")
        let route = old.route
        old.failedAt = StreamTableTests.start
        let new = Pair(table.newKey(), route, owner: "alice")
        table.insert(new)
        table.remove(old)
        #expect(table.live(on: route) === new)
    }

    @Test("the continuing side's pairs by originator endpoint: for interruptions and for the connections to keep")
    func dealers() {
        var table = StreamTable<Pair>()
        let a = Pair(table.newKey(), StreamRoute(peer: .dealer("tcp://a:1"), id: table.newRouteID()), owner: "a", isContinuer: true)
        let b = Pair(table.newKey(), StreamRoute(peer: .dealer("tcp://b:1"), id: table.newRouteID()), owner: "b", isContinuer: true)
        table.insert(a)
        table.insert(b)
        _ = accepted(&table, from: [1], id: 1, owner: "c")
        #expect(table.live(toDealer: "tcp://a:1").map(\.key) == [a.key])
        #expect(table.dealerEndpoints == ["tcp://a:1", "tcp://b:1"])
        b.failedAt = StreamTableTests.start
        #expect(table.live(toDealer: "tcp://b:1").isEmpty)
        #expect(table.dealerEndpoints.contains("tcp://b:1"))  // its connection stays until it is forgotten
        #expect(table.live.map(\.key) == [a.key, table.live.last!.key])
    }

    @Test("eviction ends a stalled pair a peer opened here: from the peer holding most, the one stalled longest; never one making progress or this node's own")
    func eviction() {
        var table = StreamTable<Pair>()
        let now = Self.start + .seconds(100)
        let grace = Duration.seconds(10)
        let alice1 = accepted(&table, from: [1], id: 1, owner: "alice")
        let alice2 = accepted(&table, from: [1], id: 2, owner: "alice")
        let bob = accepted(&table, from: [2], id: 3, owner: "bob")
        let own = Pair(table.newKey(), StreamRoute(peer: .dealer("tcp://o:1"), id: 1), owner: "carol", isContinuer: true)
        table.insert(own)
        own.peersTurnSince = Self.start  // stalled longest of all, but this node opened it
        bob.peersTurnSince = Self.start + .seconds(1)  // stalled longer than alice's, but bob holds one pair
        alice1.peersTurnSince = Self.start + .seconds(50)
        alice2.peersTurnSince = Self.start + .seconds(20)
        #expect(table.stalledVictim(now: now, grace: grace) === alice2)
        alice2.waitsOnPeer = false  // its own reader is behind: not the peer's fault
        #expect(table.stalledVictim(now: now, grace: grace) === alice1)
        alice1.peersTurnSince = now - .seconds(5)  // within the grace
        #expect(table.stalledVictim(now: now, grace: grace) === bob)
        bob.failedAt = StreamTableTests.start
        #expect(table.stalledVictim(now: now, grace: grace) == nil)
    }

    @Test("failed pairs are kept up to a number: the ones that failed first are the ones to forget; live pairs never are")
    func failedPairsBounded() {
        var table = StreamTable<Pair>()
        let live = accepted(&table, from: [9], id: 1, owner: "alice")
        var failed: [Pair] = []
        for index in 0..<6 {
            let pair = accepted(&table, from: [1], id: UInt64(index + 2), owner: "mallory")
            pair.failedAt = Self.start + .seconds(10 - index)  // failed in the reverse order of opening
            failed.append(pair)
        }
        #expect(table.failedToMakeRoom(keeping: 6).isEmpty)
        #expect(table.failedToMakeRoom(keeping: 5).map(\.key) == [failed[5].key])
        #expect(table.failedToMakeRoom(keeping: 4).map(\.key) == [failed[5].key, failed[4].key])
        #expect(table.failedToMakeRoom(keeping: 0).count == 6)
        #expect(!table.failedToMakeRoom(keeping: 0).contains { $0 === live })
    }
}
