import Foundation
import HandoffWire
import Testing
import ZeroMQ
@testable import Handoff
import HandoffTestSupport

/// How many node events about one peer's doings go on the bus (``PeerEventBudget``): the rule on
/// its own, with no clock, and a real node answering a peer that continues in a loop.
@Suite("Node events about one peer's doings, within its budget", .exclusive)
struct PeerEventBudgetTests {
    private static let start = ContinuousClock.now

    private static func admitted(_ count: Int, of peer: String, _ budget: inout PeerEventBudget, at time: Duration) -> Int {
        (0..<count).count { _ in budget.admit(peer, now: start + time) }
    }

    @Test("rule: a burst of 200 events about a peer goes out, then 50 a second; another peer's budget is its own; a quiet peer has its burst again")
    func burstThenRate() {
        var budget = PeerEventBudget()
        let rounds = [
            Self.admitted(300, of: "churner", &budget, at: .zero),
            Self.admitted(10, of: "someone else", &budget, at: .zero),
            Self.admitted(100, of: "churner", &budget, at: .seconds(1)),
            Self.admitted(100, of: "churner", &budget, at: .milliseconds(1_100)),
            Self.admitted(300, of: "churner", &budget, at: .seconds(20)),
        ]
        #expect(rounds == [200, 10, 50, 5, 200])
    }

    @Test("rule: the peers remembered stay within the capacity; newcomers past it share one budget; peers whose budget refilled are forgotten first")
    func peersBounded() {
        var budget = PeerEventBudget()
        let flood = PeerEventBudget.capacity + 1_000
        // Every name takes one event at once: no bucket is full again, so none can be forgotten.
        let admitted = (0..<flood).count { budget.admit("peer-\($0)", now: Self.start) }
        #expect(budget.peers <= PeerEventBudget.capacity + 1)
        #expect(admitted == PeerEventBudget.capacity + Int(PeerEventBudget.burst),
                "past the capacity, the newcomers share one burst: \(admitted)")
        // A second later every one-event peer has refilled and goes; the shared one has not.
        let late = budget.admit("late", now: Self.start + .seconds(1))
        #expect(late)
        #expect(budget.peers == 2)
    }

    @Test("a peer continuing an activity in a loop: the node publishes at most its burst and rate of continued events on the bus")
    func continuesInALoop() async throws {
        try await withTwoNodes { a, b in
            let activity = try UserActivity(activityType: "org.handoff.test.loop")
            activity.title = "continued in a loop"
            try await activity.becomeCurrent(on: a)
            let found = try await discovered(activity.id, on: b)
            await b.setContinuationHandler(forType: activity.activityType) { _ in }
            let context = try Context()
            let monitor = try context.socket(.sub)
            try monitor.subscribe("E:")
            try monitor.connect(try #require(a.busEndpoint))
            func continuedEvents(within timeout: Duration) async throws -> Int {
                var count = 0
                while let frames = try await receiveMessage(monitor, timeout: timeout), frames.count >= 2 {
                    if case .nodeEvent(let event)? = try WireEnvelope.decode(frames[1].bytes).body, event.kind == .continued,
                       event.activityID == activity.id { count += 1 }
                }
                return count
            }
            // The monitor's subscription reaches the node's publisher a moment after it connects.
            var warmUp = 0, heard = 0
            while heard == 0, warmUp < 20 {
                _ = try await b.continueActivity(found)
                warmUp += 1
                heard = try await continuedEvents(within: .milliseconds(200))
            }
            try #require(heard > 0, "the monitor heard no continued event")
            let started = ContinuousClock.now
            for _ in 0..<400 { _ = try await b.continueActivity(found) }
            let elapsed = (ContinuousClock.now - started).seconds
            heard += try await continuedEvents(within: .milliseconds(500))
            let bound = Int(PeerEventBudget.burst) + Int(PeerEventBudget.perSecond * (elapsed + 0.2 * Double(warmUp) + 0.5)) + 1
            #expect(heard <= bound, "\(heard) of \(400 + warmUp) continues published in \(elapsed) s")
            #expect(heard >= Int(PeerEventBudget.burst) - warmUp, "the burst goes out whole: \(heard)")
        }
    }
}
