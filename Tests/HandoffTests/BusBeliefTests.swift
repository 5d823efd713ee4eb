import Foundation
import Testing

@testable import Handoff

/// What a message claims, gathered in one value for the tests (the follower passes its parts to
/// ``BusBelief/judge(senderNodeID:senderKey:originNodeID:originKey:subject:sequence:sentAt:knownKey:now:clock:allowingRepeat:)``
/// where they lie).
extension BusBelief {
    struct Claim {
        var senderNodeID: String
        var senderKey: Data
        var originNodeID: HashedID
        var originKey: Data
        var subject: HashedID
        var sequence: UInt64
        var sentAt: Date?
    }

    mutating func judge(
        _ claim: Claim, knownKey: [UInt8]?, now: Date = Date(), clock: ContinuousClock.Instant = .now, allowingRepeat: Bool = false
    ) -> Verdict {
        judge(senderNodeID: claim.senderNodeID, senderKey: claim.senderKey, originNodeID: claim.originNodeID, originKey: claim.originKey,
              subject: claim.subject, sequence: claim.sequence, sentAt: claim.sentAt,
              knownKey: knownKey, now: now, clock: clock, allowingRepeat: allowingRepeat)
    }
}

/// wire.proto's "Senders" rules for a follower, on the decision alone: no socket, no node.
@Suite("Who a follower believes, without sockets")
struct BusBeliefTests {
    let now = Date()
    let keyA = Data(repeating: 0xA, count: 32), keyB = Data(repeating: 0xB, count: 32)

    func claim(sender: String = "a", senderKey: Data? = nil, origin: String = "a", originKey: Data? = nil,
               subject: String = "act-1", sequence: UInt64, sentAt: Date? = Date()) -> BusBelief.Claim {
        BusBelief.Claim(senderNodeID: sender, senderKey: senderKey ?? keyA, originNodeID: HashedID(origin), originKey: originKey ?? keyA,
                        subject: HashedID(subject), sequence: sequence, sentAt: sentAt)
    }

    func belief(secure: Bool) -> BusBelief {
        BusBelief(secure: secure, replayGuard: ReplayGuard(window: .seconds(60)))
    }

    @Test("news of an activity is believed only from its origin: another node's is foreign, secure or not")
    func onlyTheOrigin() {
        for secure in [false, true] {
            var judge = belief(secure: secure)
            guard case .foreign = judge.judge(claim(sender: "b", sequence: 1), knownKey: nil, now: now) else {
                Issue.record("a message about a's activity sent by b was believed (secure: \(secure))")
                continue
            }
            #expect(judge.judge(claim(sequence: 1), knownKey: nil, now: now) == .believed)
        }
    }

    @Test("secure: the sender's key must be the origin's, and the key the activity is known under")
    func secureKeys() {
        var judge = belief(secure: true)
        guard case .foreign = judge.judge(claim(senderKey: keyB, sequence: 1), knownKey: nil, now: now) else {
            Issue.record("a sender key other than the origin's was believed")
            return
        }
        // A member claiming an activity known under another key cannot take it over.
        guard case .foreign = judge.judge(claim(senderKey: keyB, originKey: keyB, sequence: 2), knownKey: Array(keyA), now: now) else {
            Issue.record("an activity known under key A was taken over with key B")
            return
        }
        #expect(judge.judge(claim(sequence: 3), knownKey: Array(keyA), now: now) == .believed)
        // Without CURVE keys say nothing: only the node id counts.
        var open = belief(secure: false)
        #expect(open.judge(claim(senderKey: keyB, sequence: 1), knownKey: Array(keyA), now: now) == .believed)
    }

    @Test("a sequence not newer than the last one believed is a replay; one outside the window, or with no time, is stale")
    func replayAndStaleness() {
        var judge = belief(secure: false)
        #expect(judge.judge(claim(sequence: 5), knownKey: nil, now: now) == .believed)
        #expect(judge.judge(claim(sequence: 5), knownKey: nil, now: now) == .replayed)
        #expect(judge.judge(claim(sequence: 4), knownKey: nil, now: now) == .replayed)
        #expect(judge.judge(claim(sequence: 6), knownKey: nil, now: now) == .believed)
        guard case .stale = judge.judge(claim(sequence: 7, sentAt: now.addingTimeInterval(-61)), knownKey: nil, now: now) else {
            Issue.record("a message sent 61 s ago (window 60 s) was not stale")
            return
        }
        guard case .stale = judge.judge(claim(sequence: 8, sentAt: nil), knownKey: nil, now: now) else {
            Issue.record("a message with no send time was not stale")
            return
        }
    }

    @Test("secure, replay protection is kept per key: one node id under two keys keeps two sequences")
    func replayPerKey() {
        var judge = belief(secure: true)
        #expect(judge.judge(claim(sequence: 10), knownKey: nil, now: now) == .believed)
        #expect(judge.judge(claim(senderKey: keyB, originKey: keyB, subject: "act-2", sequence: 1), knownKey: nil, now: now) == .believed)
        #expect(judge.judge(claim(senderKey: keyB, originKey: keyB, subject: "act-2", sequence: 1), knownKey: nil, now: now) == .replayed)
    }

    @Test("rule: secure, replay protection is kept per key and origin node: a node's new process (a new node id, the same key) may start from a lower sequence (its clock went back); each process's own messages sent again are replays")
    func replayPerKeyAndProcess() {
        var judge = belief(secure: true)
        let presence = Follower.presenceSubject.id
        #expect(judge.judge(claim(sender: "n-1", origin: "n-1", subject: presence, sequence: 2_000_000), knownKey: nil, now: now) == .believed)
        #expect(judge.judge(claim(sender: "n-2", origin: "n-2", subject: presence, sequence: 1_000_000), knownKey: nil, now: now) == .believed)
        #expect(judge.judge(claim(sender: "n-2", origin: "n-2", subject: presence, sequence: 1_000_000), knownKey: nil, now: now) == .replayed)
        #expect(judge.judge(claim(sender: "n-1", origin: "n-1", subject: presence, sequence: 2_000_000), knownKey: nil, now: now) == .replayed)
        // A process that keeps its node id (Configuration.id) is one origin: lower is a replay.
        #expect(judge.judge(claim(sender: "n-1", origin: "n-1", subject: presence, sequence: 1_500_000), knownKey: nil, now: now) == .replayed)
    }

    @Test("secure, keys that share a slot of the sender names keep their own sequences, each again and again")
    func replayPerKeySharingASlot() {
        var judge = belief(secure: true)
        // The same first byte (the names' slot), different keys.
        let first = Data([0x42] + [UInt8](repeating: 1, count: 31)), second = Data([0x42] + [UInt8](repeating: 2, count: 31))
        for round in UInt64(1)...3 {
            for key in [first, second] {
                let sent = claim(senderKey: key, originKey: key, subject: "act-\(key[1])", sequence: round)
                #expect(judge.judge(sent, knownKey: Array(key), now: now) == .believed, "round \(round)")
                #expect(judge.judge(sent, knownKey: Array(key), now: now) == .replayed, "round \(round)")
            }
        }
        // One key's sequence is not the other's: the second's message 3 about the first's subject is new.
        #expect(judge.judge(claim(senderKey: second, originKey: second, subject: "act-1", sequence: 3), knownKey: nil, now: now) == .believed)
        #expect(SenderNames().withNames(of: [first, second, first]) == [HashedID(first.base64EncodedString()),
                                                                        HashedID(second.base64EncodedString()),
                                                                        HashedID(first.base64EncodedString())])
    }
}

extension SenderNames {
    /// The names given to `keys`, one after another (for the tests).
    func withNames(of keys: [Data]) -> [HashedID] {
        var names = self
        return keys.map { names.name(of: $0) }
    }
}
