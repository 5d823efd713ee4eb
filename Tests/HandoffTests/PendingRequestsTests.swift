import Testing
@testable import Handoff

@Suite("The continuation client's pending requests, without sockets")
struct PendingRequestsTests {
    let start = ContinuousClock.now

    func request(_ endpoint: String, in seconds: Int, waiter: String = "") -> PendingRequests<String>.Request {
        .init(waiter: waiter, endpoint: endpoint, activityType: "org.handoff.test.pending", deadline: start + .seconds(seconds))
    }

    @Test("the first outcome wins: a request is taken out once")
    func firstOutcomeWins() {
        var pending = PendingRequests<String>()
        pending.add(1, request("tcp://a:1", in: 5, waiter: "fetch 1"))
        #expect(pending.remove(1)?.waiter == "fetch 1")
        #expect(pending.remove(1) == nil)
        #expect(pending.isEmpty)
    }

    @Test("deadlines expire the requests due, soonest first, and only those")
    func deadlines() {
        var pending = PendingRequests<String>()
        pending.add(1, request("tcp://a:1", in: 5))
        pending.add(2, request("tcp://b:1", in: 1))
        pending.add(3, request("tcp://a:1", in: 3))
        #expect(pending.expired(at: start).isEmpty)
        #expect(pending.expired(at: start + .seconds(3)) == [2, 3])
        #expect(pending.expired(at: start + .seconds(10)) == [2, 3, 1])
    }

    @Test("a dropped connection finds the requests to its endpoint; every endpoint in use is known")
    func endpoints() {
        var pending = PendingRequests<String>()
        pending.add(7, request("tcp://a:1", in: 5))
        pending.add(8, request("tcp://b:1", in: 5))
        pending.add(9, request("tcp://a:1", in: 5))
        #expect(pending.ids(to: "tcp://a:1") == [7, 9])
        #expect(pending.endpoints == ["tcp://a:1", "tcp://b:1"])
        _ = pending.remove(8)
        #expect(pending.endpoints == ["tcp://a:1"])
        #expect(pending.ids == [7, 9])
    }
}
