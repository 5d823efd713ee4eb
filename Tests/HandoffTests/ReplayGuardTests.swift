import Foundation
import Testing
@testable import Handoff

@Suite("Replay protection, without sockets")
struct ReplayGuardTests {
    let now = Date(timeIntervalSince1970: 2_000_000_000)

    @Test("a higher sequence is fresh; the same or a lower one is a replay; senders and activities are apart")
    func sequences() {
        var guarding = ReplayGuard(window: .seconds(60))
        #expect(guarding.check(sender: "n1", subject: "a", sequence: 5, sentAt: now, now: now) == .fresh)
        #expect(guarding.check(sender: "n1", subject: "a", sequence: 5, sentAt: now, now: now) == .replayed)
        #expect(guarding.check(sender: "n1", subject: "a", sequence: 4, sentAt: now, now: now) == .replayed)
        #expect(guarding.check(sender: "n1", subject: "a", sequence: 6, sentAt: now, now: now) == .fresh)
        #expect(guarding.check(sender: "n1", subject: "b", sequence: 1, sentAt: now, now: now) == .fresh)
        #expect(guarding.check(sender: "n2", subject: "a", sequence: 1, sentAt: now, now: now) == .fresh)
        #expect(guarding.count == 3)
    }

    @Test("bounded: a sender's new subjects past its share, or any past the whole table, are not believed (nothing is forgotten to make room, so no replay gets through); known subjects go on; pruning gives room back")
    func bounded() {
        var guarding = ReplayGuard(window: .seconds(60), maxPerSender: 3, maxEntries: 5)
        let clock = ContinuousClock.now
        for subject in ["a", "b", "c"] {
            #expect(guarding.check(sender: "flood", subject: subject, sequence: 1, sentAt: now, now: now, clock: clock) == .fresh)
        }
        #expect(guarding.check(sender: "flood", subject: "d", sequence: 2, sentAt: now, now: now, clock: clock) == .full)
        #expect(guarding.check(sender: "flood", subject: "a", sequence: 3, sentAt: now, now: now, clock: clock) == .fresh, "a known subject goes on")
        #expect(guarding.check(sender: "flood", subject: "a", sequence: 1, sentAt: now, now: now, clock: clock) == .replayed)
        #expect(guarding.check(sender: "n2", subject: "a", sequence: 1, sentAt: now, now: now, clock: clock) == .fresh)
        #expect(guarding.check(sender: "n3", subject: "a", sequence: 1, sentAt: now, now: now, clock: clock) == .fresh)
        #expect(guarding.check(sender: "n4", subject: "a", sequence: 1, sentAt: now, now: now, clock: clock) == .full, "the whole table is full")
        #expect(guarding.count == 5 && guarding.entries(of: "flood") == 3)
        guarding.prune(now: clock + .seconds(61))
        #expect(guarding.count == 0 && guarding.entries(of: "flood") == 0)
        let later = now.addingTimeInterval(61)
        #expect(guarding.check(sender: "flood", subject: "d", sequence: 4, sentAt: later, now: later, clock: clock + .seconds(61)) == .fresh)
    }

    @Test("a sender whose name holds a slash is not taken for another sender about another activity")
    func senderAndSubjectApart() {
        var guarding = ReplayGuard(window: .seconds(60))
        let first = guarding.check(sender: "a/b", subject: "c", sequence: 5, sentAt: now, now: now)
        let other = guarding.check(sender: "a", subject: "b/c", sequence: 5, sentAt: now, now: now)
        #expect(first == .fresh && other == .fresh)
        #expect(guarding.count == 2)
    }

    @Test("a snapshot answer may bring the last message believed again (a broker's cached copy); nothing older, and a live repeat stays a replay")
    func repeatFromSnapshot() {
        var guarding = ReplayGuard(window: .seconds(60))
        let first = guarding.check(sender: "n1", subject: "a", sequence: 5, sentAt: now, now: now)
        let repeated = guarding.check(sender: "n1", subject: "a", sequence: 5, sentAt: now, now: now, allowingRepeat: true)
        let older = guarding.check(sender: "n1", subject: "a", sequence: 4, sentAt: now, now: now, allowingRepeat: true)
        let live = guarding.check(sender: "n1", subject: "a", sequence: 5, sentAt: now, now: now)
        #expect(first == .fresh && repeated == .fresh && older == .replayed && live == .replayed)
    }

    @Test("outside the window, either way, or with no send time, a message is stale and changes nothing")
    func window() {
        var guarding = ReplayGuard(window: .seconds(60))
        #expect(guarding.check(sender: "n1", subject: "a", sequence: 9, sentAt: now - 61, now: now) == .stale(age: 61))
        #expect(guarding.check(sender: "n1", subject: "a", sequence: 9, sentAt: now + 61, now: now) == .stale(age: -61))
        #expect(guarding.check(sender: "n1", subject: "a", sequence: 9, sentAt: nil, now: now) == .stale(age: .infinity))
        #expect(guarding.count == 0)
        #expect(guarding.check(sender: "n1", subject: "a", sequence: 1, sentAt: now - 59, now: now) == .fresh)
    }

    @Test("pruning forgets entries older than the window; a replay of them is stale by its own time by then")
    func prune() {
        var guarding = ReplayGuard(window: .seconds(60))
        let start = ContinuousClock.now
        #expect(guarding.check(sender: "n1", subject: "a", sequence: 3, sentAt: now, now: now, clock: start) == .fresh)
        #expect(guarding.check(sender: "n1", subject: "b", sequence: 3, sentAt: now, now: now, clock: start + .seconds(30)) == .fresh)
        guarding.prune(now: start + .seconds(61))
        #expect(guarding.count == 1)
        // The pruned entry's message, replayed 61 s later, is stale whatever its sequence.
        #expect(guarding.check(sender: "n1", subject: "a", sequence: 3, sentAt: now, now: now + 61) == .stale(age: 61))
    }
}
