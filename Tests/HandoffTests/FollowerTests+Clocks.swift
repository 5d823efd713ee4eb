import Foundation
import HandoffWire
import Testing
@testable import Handoff

/// Replay protection across a node's restarts when its host's clock went back (ReplayGuard): a
/// process's sequences start from its clock, and a node keeps its key across restarts, not its id.
extension FollowerTests {
    /// Found by the simulator with clocks stepped across restarts (docs/testing.md, "Not simulated
    /// yet"): replay protection kept one sequence per key for every presence, so the next process's
    /// presence, numbered from a clock that had gone back, was refused as a replay of the first's
    /// until the window passed, and its activities were lost everywhere meanwhile.
    @Test("rule: secure, a node's next process (a new node id under the same key), started after its clock went back, is believed and its presence renews its activities; the first process's presence sent again is still a replay")
    func nextProcessAfterClockWentBack() {
        var follower = Follower(settings(secure: true))
        let first = node("o1-first", key: 1), next = node("o1-next", key: 1)
        // The first process, its clock ahead: its sequences start from a later time.
        _ = hear(&follower, advertisement("a", of: first), from: first, sequence: 2_000_000)
        _ = hear(&follower, presence(of: first, listing: ["a"]), from: first, sequence: 2_000_001, at: 1, topic: "P:o1-first")
        // The next process: its clock went back, so its sequences are lower.
        #expect(events(hear(&follower, advertisement("b", of: next), from: next, sequence: 1_000_000, at: 3)) == ["appeared b v1"])
        let renewal = hear(&follower, presence(of: next, listing: ["b"]), from: next, sequence: 1_000_001, at: 8, topic: "P:o1-next")
        #expect(ignored(renewal).isEmpty, "\(renewal)")
        #expect(follower.directory.nodes.contains { $0.info.id == "o1-next" })
        // Renewed at 8 s for 6 s: b outlives the lease its advertisement gave it (until 9 s).
        let later = follower.tick(now: start + .seconds(12), date: date.addingTimeInterval(12))
        #expect(!events(later).contains("removed b lost"), "\(events(later))")
        #expect(follower.known["b"] != nil)
        // The first process's presence, sent again, is a replay still.
        let again = hear(&follower, presence(of: first, listing: ["a"]), from: first, sequence: 2_000_001, at: 9, topic: "P:o1-first")
        #expect(ignored(again) == [.replayed], "\(again)")
    }

    @Test("a message sent outside the replay window by its sender's clock, behind or ahead, is stale, naming its sender and how far off it was: what a node warns of, with the likely cause")
    func staleNamesItsSenderAndAge() {
        var follower = Follower(settings())  // a 30-s window
        let origin = node("o1")
        for (offset, sequence) in [(-40.0, UInt64(1)), (45.0, UInt64(2))] {
            let envelope = WireEnvelope(body: advertisement("a", of: origin), sender: origin, sequence: sequence, sentAt: date.addingTimeInterval(offset))
            let actions = follower.received(envelope, topic: Array("A:org.test.edit".utf8), connectionKey: nil, now: start, date: date)
            #expect(ignored(actions) == [.stale(subject: "a", sender: "o1", age: -offset)], "\(actions)")
        }
        #expect(follower.known["a"] == nil)
        let warning = Node.staleWarning(sender: "o1", age: 40, window: .seconds(60))
        #expect(warning.contains("node o1") && warning.contains("40 s old") && warning.contains("60 s replay window") && warning.contains("NTP"), "\(warning)")
        #expect(Node.staleWarning(sender: "o1", age: -45, window: .seconds(60)).contains("45 s ahead"))
    }
}
