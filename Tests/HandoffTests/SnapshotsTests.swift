import Testing
@testable import Handoff

@Suite("Snapshots (state, no sockets)")
struct SnapshotsTests {
    @Test("a snapshot topic carries a 32-digit token and the type prefix; anything else is not one")
    func topics() {
        let token = Topic.newSnapshotToken()
        #expect(token.count == 32 && token.allSatisfy(\.isHexDigit))
        #expect(Topic.newSnapshotToken() != token)
        let topic = Topic.snapshot(token: token, typePrefix: "org.handoff.contacts.")
        #expect(topic == "S:" + token + "/org.handoff.contacts.")
        #expect(Topic.snapshotTypePrefix(Array(topic.utf8)) == "org.handoff.contacts.")
        #expect(Topic.snapshotTypePrefix(Array(Topic.snapshot(token: token, typePrefix: "").utf8)) == "")
        for malformed in ["S:", "S:abc/x", "A:" + token + "/x", "S:" + token + "x", "S:" + token.uppercased() + "/x",
                          "S:" + String(token.dropLast()) + "g/x"] {
            #expect(Topic.snapshotTypePrefix(Array(malformed.utf8)) == nil, "\(malformed)")
        }
    }

    @Test("with a broker, one reply completes a snapshot that arrived whole")
    func completeWithBroker() {
        var requests = SnapshotRequests(expectedReplies: 1)
        let topic = requests.start(typePrefix: "org.")
        #expect(!requests.isEmpty)
        for _ in 0..<3 { let result = requests.advertisementArrived(on: topic, now: .now); #expect(result) }
        do { let result = requests.replyArrived(on: topic, count: 3); #expect(result == .complete) }
        #expect(requests.isEmpty)
        // A late or repeated answer to a finished snapshot is not counted anywhere.
        do { let result = requests.advertisementArrived(on: topic, now: .now); #expect(!result) }
        do { let result = requests.replyArrived(on: topic, count: 3); #expect(result == .unknown) }
    }

    @Test("in direct mode a snapshot waits for every peer, and adds up what they promised")
    func directModeWaitsForEveryPeer() {
        var requests = SnapshotRequests(expectedReplies: 3)
        let topic = requests.start(typePrefix: "")
        do { let result = requests.advertisementArrived(on: topic, now: .now); #expect(result) }
        do { let result = requests.replyArrived(on: topic, count: 1); #expect(result == .waiting) }
        do { let result = requests.replyArrived(on: topic, count: 0); #expect(result == .waiting) }
        do { let result = requests.advertisementArrived(on: topic, now: .now); #expect(result) }
        do { let result = requests.replyArrived(on: topic, count: 2); #expect(result == .retry(typePrefix: "", attempt: 2), "2 of 3 arrived") }
    }

    @Test("when some answerers never reply, a snapshot ends a grace period after the first reply")
    func graceForMissingAnswerers() {
        var requests = SnapshotRequests(expectedReplies: 2)
        let start = ContinuousClock.now
        let answered = requests.start(typePrefix: "org.")
        let unanswered = requests.start(typePrefix: "com.")
        for _ in 0..<2 { _ = requests.advertisementArrived(on: answered, now: start) }
        do { let result = requests.replyArrived(on: answered, count: 2, now: start); #expect(result == .waiting) }
        do { let result = requests.expire(now: start + .milliseconds(500), grace: .seconds(1)); #expect(result.isEmpty) }
        let expired = requests.expire(now: start + .seconds(1), grace: .seconds(1))
        #expect(expired.map(\.topic) == [answered])
        #expect(expired.map(\.outcome) == [.complete])
        // Nobody replied at all: it waits (a broker may come back), and says it is not synchronized.
        #expect(!requests.isEmpty)
        #expect(requests.pending.keys.contains(unanswered))
    }

    @Test("an answerer still sending its answer (in slices) holds the grace open: it ends a grace after the last arrival, not after the first reply")
    func graceHeldOpenByArrivals() {
        var requests = SnapshotRequests(expectedReplies: 2)
        let start = ContinuousClock.now
        let topic = requests.start(typePrefix: "org.")
        do { let result = requests.replyArrived(on: topic, count: 0, now: start); #expect(result == .waiting) }
        for step in 1...3 {
            let now = start + .milliseconds(800) * step
            _ = requests.advertisementArrived(on: topic, now: now)
            #expect(requests.expire(now: now + .milliseconds(999), grace: .seconds(1)).isEmpty, "step \(step): still arriving")
        }
        do { let result = requests.replyArrived(on: topic, count: 3, now: start + .milliseconds(2_500)); #expect(result == .complete) }
        // The same without the second reply: a grace after the last advertisement, it is over.
        let other = requests.start(typePrefix: "com.")
        _ = requests.replyArrived(on: other, count: 0, now: start)
        _ = requests.advertisementArrived(on: other, now: start + .milliseconds(800))
        #expect(requests.expire(now: start + .milliseconds(1_700), grace: .seconds(1)).isEmpty)
        #expect(requests.expire(now: start + .milliseconds(1_800), grace: .seconds(1)).map(\.topic) == [other])
    }

    @Test("a short snapshot is asked again, up to the last attempt, then accepted as it is")
    func retriesThenGivesUp() {
        var requests = SnapshotRequests(expectedReplies: 1)
        var topic = requests.start(typePrefix: "org.")
        for attempt in 2...SnapshotRequests.maxAttempts {
            do { let result = requests.replyArrived(on: topic, count: 5); #expect(result == .retry(typePrefix: "org.", attempt: attempt)) }
            topic = requests.start(typePrefix: "org.", attempt: attempt)
        }
        for _ in 0..<4 { _ = requests.advertisementArrived(on: topic, now: .now) }
        do { let result = requests.replyArrived(on: topic, count: 5); #expect(result == .incomplete(typePrefix: "org.", received: 4, promised: 5)) }
        #expect(requests.isEmpty)
    }

    @Test("the backoff before each attempt again doubles from 250 ms, stretched by the jitter by up to half again; the attempts span about 4 to 6 s")
    func backoffDoubles() {
        #expect(SnapshotRequests.retryDelay(attempt: 2, jitter: 0) == .milliseconds(250))
        #expect(SnapshotRequests.retryDelay(attempt: 3, jitter: 0) == .milliseconds(500))
        #expect(SnapshotRequests.retryDelay(attempt: 5, jitter: 0) == .seconds(2))
        #expect(SnapshotRequests.retryDelay(attempt: 2, jitter: 0.5) == .microseconds(312_500))
        #expect(SnapshotRequests.retryDelay(attempt: 2, jitter: 7) == .microseconds(375_000), "a jitter out of range is held to it")
        let span = { (jitter: Double) in (2...SnapshotRequests.maxAttempts).reduce(Duration.zero) { $0 + SnapshotRequests.retryDelay(attempt: $1, jitter: jitter) } }
        #expect(span(0) == .milliseconds(3_750))
        #expect(span(0.999) < .milliseconds(5_625) && span(0.999) > .milliseconds(5_600))
    }

    @Test("a retry waits out its backoff: the requests are not empty (not synchronized) meanwhile, it is due once, and dropping its type prefix drops it")
    func retriesWaitTheirBackoff() {
        var requests = SnapshotRequests(expectedReplies: 1)
        let start = ContinuousClock.now
        requests.scheduleRetry(typePrefix: "org.", attempt: 2, now: start, jitter: 0)
        requests.scheduleRetry(typePrefix: "com.", attempt: 3, now: start, jitter: 0)
        #expect(!requests.isEmpty && requests.isPending(typePrefix: "org.") && requests.isPending(typePrefix: "com."))
        do { let due = requests.dueRetries(now: start + .milliseconds(249)); #expect(due.isEmpty) }
        do { let due = requests.dueRetries(now: start + .milliseconds(250)); #expect(due.map(\.typePrefix) == ["org."] && due.map(\.attempt) == [2]) }
        do { let due = requests.dueRetries(now: start + .milliseconds(300)); #expect(due.isEmpty, "taken once") }
        #expect(requests.cancel(typePrefix: "com.").isEmpty, "no request under way for it, only the attempt waiting")
        #expect(requests.isEmpty && !requests.isPending(typePrefix: "com."))
        do { let due = requests.dueRetries(now: start + .seconds(10)); #expect(due.isEmpty) }
    }

    @Test("dropping a type prefix cancels its snapshots and only those")
    func cancel() {
        var requests = SnapshotRequests(expectedReplies: 1)
        let contacts = requests.start(typePrefix: "org.handoff.contacts.")
        let notes = requests.start(typePrefix: "org.handoff.notes.")
        do { let result = requests.cancel(typePrefix: "org.handoff.contacts."); #expect(result == [contacts]) }
        do { let result = requests.replyArrived(on: contacts, count: 0); #expect(result == .unknown) }
        do { let result = requests.replyArrived(on: notes, count: 0); #expect(result == .complete) }
    }

    @Test("rule: a round that wants a snapshot while one asked before its news is under way is owed one of its own, asked once that one ends (not while an attempt waits to be asked again), and the requests are not empty until then")
    func roundOwedItsOwnSnapshot() {
        var requests = SnapshotRequests(expectedReplies: 2)
        let start = ContinuousClock.now
        let before = requests.start(typePrefix: "org.", now: start)
        do { let asked = requests.wanted(typePrefix: "com."); #expect(asked, "none under way: asked now") }
        do { let asked = requests.wanted(typePrefix: "org."); #expect(!asked, "one under way: owed, not asked") }
        do { let asked = requests.wanted(typePrefix: "org."); #expect(!asked) }
        do { let owed = requests.owedNow(); #expect(owed.isEmpty, "still under way") }
        // One answerer replies, the other (stopped when asked) never does: it ends on the grace.
        do { let outcome = requests.replyArrived(on: before, count: 0, now: start); #expect(outcome == .waiting) }
        do { let ended = requests.expire(now: start + .seconds(1), grace: .milliseconds(500)); #expect(ended.map(\.topic) == [before]) }
        #expect(!requests.isEmpty, "owed: not settled")
        do { let owed = requests.owedNow(); #expect(owed == ["org."]) }
        do { let owed = requests.owedNow(); #expect(owed.isEmpty && requests.isEmpty, "handed out once") }

        // An attempt waiting to be asked again is asked after the news: nothing more is owed.
        let short = requests.start(typePrefix: "org.", now: start)
        do { let asked = requests.wanted(typePrefix: "org."); #expect(!asked) }
        requests.scheduleRetry(typePrefix: "org.", attempt: 2, now: start, jitter: 0)
        requests.drop(short)
        do { let owed = requests.owedNow(); #expect(owed.isEmpty) }
        do { let asked = requests.wanted(typePrefix: "org."); #expect(!asked, "an attempt waits") }
        do { let topics = requests.cancel(typePrefix: "org."); #expect(topics.isEmpty && requests.isEmpty) }
    }
}
