import Foundation
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
@testable import Handoff

/// A broker's snapshot answers within half its thread's time (``SnapshotBudget``), with no socket
/// and no real clock.
@Suite("A broker's snapshot budget")
struct SnapshotBudgetTests {
    let start = ContinuousClock.now

    @Test("answers take at most half the thread after a burst of 2 s: past it the next waits for the budget to fill again")
    func budget() {
        var budget = SnapshotBudget()
        var admitted: [Bool] = [budget.admits(now: start)]
        budget.spent(.milliseconds(2_500), now: start)
        admitted.append(budget.admits(now: start + .milliseconds(900)))  // 0.45 s earned back, 0.5 s owed
        admitted.append(budget.admits(now: start + .milliseconds(1_100)))
        // However long it rests, no more than the burst is saved up.
        admitted.append(budget.admits(now: start + .seconds(3_600)))
        budget.spent(.milliseconds(2_001), now: start + .seconds(3_600))
        admitted.append(budget.admits(now: start + .seconds(3_600)))
        #expect(admitted == [true, false, true, true, false])
    }

    @Test("a busy broker answers with the count alone (counted again at most every 100 ms per prefix) so that the follower asks again; nothing matching is a whole answer")
    func busyAnswers() throws {
        var core = BrokerCore(
            cacheEnabled: true, cache: LastValueCache(capacity: 100, defaultLease: .seconds(30)),
            sender: NodeInfo(id: "broker@test", name: "broker", host: "test", publicKey: nil).wire)
        for id in ["a1", "a2", "a3"] { _ = core.publisherMessage(BrokerCoreTests.advertisement(id, from: "n1"), connectionKey: nil, now: start) }
        core.snapshotAnswered(cost: .seconds(3), now: start)
        let inFull = core.answersSnapshotInFull(now: start)
        #expect(!inFull)
        func promised(_ reply: [UInt8]) throws -> UInt32? {
            if case .snapshotReply(let answer)? = try WireEnvelope.decode(reply).body { answer.count } else { nil }
        }
        var counts: [UInt32?] = [try promised(core.busySnapshotReply(typePrefix: "org.test.", topic: [], now: start))]
        _ = core.publisherMessage(BrokerCoreTests.advertisement("a4", from: "n1"), connectionKey: nil, now: start)
        counts.append(try promised(core.busySnapshotReply(typePrefix: "org.test.", topic: [], now: start + .milliseconds(50))))  // not counted again
        counts.append(try promised(core.busySnapshotReply(typePrefix: "org.test.", topic: [], now: start + .milliseconds(150))))
        counts.append(try promised(core.busySnapshotReply(typePrefix: "org.none.", topic: [], now: start)))
        #expect(counts == [3, 3, 4, 0])
        #expect(core.counters.snapshotsBusy == 4 && core.counters.snapshots == 4 && core.counters.snapshotAdvertisements == 0)
    }
}
