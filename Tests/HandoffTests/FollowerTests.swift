import Foundation
import HandoffWire
import Testing
@testable import Handoff

/// The following side's rules on ``Follower``, with no socket and no real clock.
@Suite("Follower: what a node knows of other nodes' activities and believes of the bus (no I/O)")
struct FollowerTests {
    let start = ContinuousClock.now
    let date = Date(timeIntervalSince1970: 2_000_000_000)

    func settings(secure: Bool = false, answerers: Int = 1, maxPerNode: Int = 100) -> Follower.Settings {
        Follower.Settings(
            nodeID: "me", defaultLease: .seconds(6), maxKnownPerNode: maxPerNode, maxKnown: 1_000,
            replayWindow: .seconds(30), secure: secure, snapshotAnswerers: answerers)
    }

    func node(_ id: String, key: UInt8? = nil) -> WireNodeRef {
        var node = WireNodeRef()
        node.nodeID = id
        node.name = id
        if let key { node.publicKey = Data(repeating: key, count: 32) }
        return node
    }

    func advertisement(_ id: String, of origin: WireNodeRef, version: UInt64 = 1, type: String = "org.test.edit", expires: Date? = nil) -> WireEnvelope.OneOf_Body {
        var advertisement = WireAdvertisement()
        advertisement.activityID = id
        advertisement.activityType = type
        advertisement.title = id
        advertisement.origin = origin
        advertisement.continueEndpoint = "tcp://10.0.0.2:7000"
        advertisement.version = version
        advertisement.leaseMs = 6_000
        if let expires { advertisement.expiresAt = WireTimestamp(expires) }
        return .advertisement(advertisement)
    }

    func withdrawal(_ id: String, of origin: WireNodeRef) -> WireEnvelope.OneOf_Body {
        var withdrawal = WireWithdrawal()
        withdrawal.activityID = id
        withdrawal.activityType = "org.test.edit"
        withdrawal.origin = origin
        withdrawal.reason = RemovalReason.invalidated.wire
        return .withdrawal(withdrawal)
    }

    func presence(of origin: WireNodeRef, listing ids: [String]) -> WireEnvelope.OneOf_Body {
        var presence = WireNodePresence()
        presence.node = origin
        presence.activityIds = ids
        presence.leaseMs = 6_000
        return .nodePresence(presence)
    }

    /// What `sender` says, as the follower receives it at `at` seconds after the start.
    func hear(
        _ follower: inout Follower, _ body: WireEnvelope.OneOf_Body, from sender: WireNodeRef, sequence: UInt64,
        at seconds: Double = 0, topic: String = "A:org.test.edit", connectionKey: Data? = nil
    ) -> [Follower.Action] {
        let envelope = WireEnvelope(body: body, sender: sender, sequence: sequence, sentAt: date.addingTimeInterval(seconds))
        let now = start + .milliseconds(Int(seconds * 1000)), date = date.addingTimeInterval(seconds)
        // An advertisement takes a node's plain way too (WireAdvertisementEnvelope): on a copy of
        // the follower, with the same outcome, so every rule here holds on both ways.
        var plainWay = follower
        let actions = follower.received(envelope, topic: Array(topic.utf8), connectionKey: connectionKey, now: now, date: date)
        if case .advertisement = body {
            let plain: WireAdvertisementEnvelope? = envelope.encoded().withUnsafeBytes { bytes in
                if case .advertisement(let plain)? = try? WireBusEnvelope.decode(bytes) { plain } else { nil }
            }
            #expect(plain != nil, "an advertisement's envelope read into plain values")
            if let plain {
                let plainActions = plainWay.received(plain, topic: Array(topic.utf8), connectionKey: connectionKey, now: now, date: date)
                #expect(Self.same(plainActions, actions), "the plain way: \(plainActions), the envelope's: \(actions)")
                #expect(plainWay.known.count == follower.known.count)
            }
        }
        return actions
    }

    /// The same actions, the activities in them compared field by field.
    static func same(_ first: [Follower.Action], _ second: [Follower.Action]) -> Bool {
        guard first.count == second.count else { return false }
        return zip(first, second).allSatisfy { pair in
            switch pair {
            case (.emit(let a), .emit(let b)): a == b
            case (.changed(let a), .changed(let b)): a == b
            default: "\(pair.0)" == "\(pair.1)"
            }
        }
    }

    func events(_ actions: [Follower.Action]) -> [String] {
        actions.compactMap {
            guard case .emit(let event) = $0 else { return nil }
            return switch event {
            case .appeared(let a): "appeared \(a.id) v\(a.version)"
            case .updated(let a): "updated \(a.id) v\(a.version)"
            case .removed(let a, let reason): "removed \(a.id) \(reason)"
            }
        }
    }

    func ignored(_ actions: [Follower.Action]) -> [Follower.Ignored] {
        actions.compactMap { if case .ignored(let why) = $0 { why } else { nil } }
    }

    /// The rounds of snapshots asked again, by why (what the node counts).
    func rounds(_ actions: [Follower.Action]) -> [Resynchronization.Reason] {
        actions.compactMap { if case .snapshotRound(let reason) = $0 { reason } else { nil } }
    }

    func subscriptions(_ actions: [Follower.Action]) -> [String] {
        actions.compactMap {
            switch $0 {
            case .subscribe(let topic): "+" + topic
            case .unsubscribe(let topic): "-" + topic
            default: nil
            }
        }
    }

    @Test("an advertisement appears once; a newer version updates it; the same version again only renews; an older sequence is a replay, ignored")
    func appearUpdateReplay() {
        var follower = Follower(settings())
        let origin = node("o1")
        #expect(events(hear(&follower, advertisement("a", of: origin), from: origin, sequence: 1)) == ["appeared a v1"])
        #expect(events(hear(&follower, advertisement("a", of: origin, version: 2), from: origin, sequence: 2)) == ["updated a v2"])
        #expect(events(hear(&follower, advertisement("a", of: origin, version: 2), from: origin, sequence: 3)).isEmpty)
        let replay = hear(&follower, advertisement("a", of: origin, version: 9), from: origin, sequence: 2)
        #expect(ignored(replay) == [.replayed] && events(replay).isEmpty)
        #expect(follower.known["a"]?.activity.version == 2)
    }

    @Test("news of an activity is believed only from its origin: another node's advertisement or withdrawal of it is foreign, and changes nothing")
    func onlyTheOrigin() {
        var follower = Follower(settings())
        let (origin, liar) = (node("o1"), node("liar"))
        _ = hear(&follower, advertisement("a", of: origin), from: origin, sequence: 1)
        let forged = hear(&follower, withdrawal("a", of: origin), from: liar, sequence: 50)
        guard case .foreign? = ignored(forged).first else {
            Issue.record("a forged withdrawal was not refused as foreign: \(forged)")
            return
        }
        #expect(follower.known["a"] != nil)
        #expect(events(hear(&follower, advertisement("b", of: origin), from: liar, sequence: 51)).isEmpty)
        #expect(follower.known["b"] == nil)
    }

    @Test("secure: a sender whose key is not the origin's, or not the key the activity is known under, is foreign; a direct peer's message naming another key than its connection's is foreign")
    func keys() {
        var follower = Follower(settings(secure: true))
        let origin = node("o1", key: 1)
        #expect(events(hear(&follower, advertisement("a", of: origin), from: origin, sequence: 1)) == ["appeared a v1"])
        let impostor = node("o1", key: 2)
        let takeover = hear(&follower, advertisement("a", of: impostor, version: 5), from: impostor, sequence: 2)
        #expect(ignored(takeover).count == 1 && events(takeover).isEmpty, "\(takeover)")
        let direct = hear(&follower, advertisement("b", of: origin), from: origin, sequence: 3, connectionKey: Data(repeating: 9, count: 32))
        #expect(ignored(direct) == [.foreign("a bus message from a direct peer that names another key as its sender")])
    }

    @Test("a withdrawal from the origin forgets the activity with its reason, and the continuation client lets it go")
    func withdrawalForgets() {
        var follower = Follower(settings())
        let origin = node("o1")
        _ = hear(&follower, advertisement("a", of: origin), from: origin, sequence: 1)
        let gone = hear(&follower, withdrawal("a", of: origin), from: origin, sequence: 2)
        #expect(events(gone) == ["removed a invalidated"])
        #expect(gone.contains { if case .forgotten("a") = $0 { true } else { false } })
        #expect(follower.known["a"] == nil)
    }

    @Test("an activity is forgotten as lost when its lease runs out unrenewed; a presence renews what it lists and forgets what it stops listing")
    func leasesAndPresence() {
        var follower = Follower(settings())
        let origin = node("o1")
        _ = hear(&follower, advertisement("a", of: origin), from: origin, sequence: 1)
        _ = hear(&follower, advertisement("b", of: origin), from: origin, sequence: 2)
        _ = hear(&follower, presence(of: origin, listing: ["a", "b"]), from: origin, sequence: 3, at: 5, topic: "P:o1")
        #expect(events(follower.tick(now: start + .seconds(10), date: date.addingTimeInterval(10))).isEmpty, "renewed at 5 s for 6 s")
        #expect(follower.directory.nodes.map(\.info.id) == ["o1"])
        let dropped = hear(&follower, presence(of: origin, listing: ["a"]), from: origin, sequence: 4, at: 10.5, topic: "P:o1")
        #expect(events(dropped) == ["removed b lost"])
        let lapsed = follower.tick(now: start + .seconds(17), date: date.addingTimeInterval(17))
        #expect(events(lapsed) == ["removed a lost"] || events(lapsed) == ["removed a expired"], "\(events(lapsed))")
        #expect(follower.known.count == 0 && follower.directory.nodes.isEmpty)
    }

    @Test("this node's own news, come back through the broker, is not news; its own presence says it is on the bus")
    func ownEcho() {
        var follower = Follower(settings())
        let me = node("me")
        #expect(hear(&follower, advertisement("mine", of: me), from: me, sequence: 1).isEmpty)
        let own = hear(&follower, presence(of: me, listing: ["mine"]), from: me, sequence: 2, topic: "P:me")
        #expect(own.count == 1 && { if case .ownPresenceHeard = own[0] { true } else { false } }())
        #expect(follower.known.count == 0)
    }

    @Test("an advertisement whose expiration date passed is not known")
    func expiredOnArrival() {
        var follower = Follower(settings())
        let origin = node("o1")
        #expect(hear(&follower, advertisement("a", of: origin, expires: date.addingTimeInterval(-1)), from: origin, sequence: 1).isEmpty)
        #expect(follower.known["a"] == nil)
    }

    @Test("following a type prefix subscribes to it and asks for its snapshot; the snapshot's advertisements are news, its reply ends it and the node is synchronized; a short one is asked again once its backoff is over")
    func snapshots() throws {
        var follower = Follower(settings())
        var tokens = ["00000000000000000000000000000001", "00000000000000000000000000000002"].makeIterator()
        follower.makeToken = { tokens.next()! }
        follower.drawJitter = { 0 }
        let origin = node("o1")
        let followed = follower.follow(["org.test."])
        let first = "S:00000000000000000000000000000001/org.test."
        #expect(subscriptions(followed) == ["+A:org.test.", "+" + first])
        #expect(!follower.isSynchronized)
        #expect(events(hear(&follower, advertisement("a", of: origin), from: origin, sequence: 1, topic: first)) == ["appeared a v1"])
        // Two promised, one arrived: asked again under a new token, once the backoff is over.
        var reply = WireSnapshotReply(count: 2, typePrefix: "org.test.")
        let short = hear(&follower, .snapshotReply(reply), from: node("broker"), sequence: 1, topic: first)
        #expect(subscriptions(short) == ["-" + first])
        #expect(!follower.isSynchronized, "an attempt still to come")
        let backoff = SnapshotRequests.firstRetryDelay
        #expect(subscriptions(follower.tick(now: start + backoff - .milliseconds(1), date: date)).isEmpty, "within the backoff")
        let second = "S:00000000000000000000000000000002/org.test."
        #expect(subscriptions(follower.tick(now: start + backoff, date: date)) == ["+" + second])
        reply.count = 0
        #expect(subscriptions(hear(&follower, .snapshotReply(reply), from: node("broker"), sequence: 2, topic: second)) == ["-" + second])
        #expect(follower.isSynchronized)
        #expect(hear(&follower, advertisement("late", of: origin), from: origin, sequence: 2, topic: first).isEmpty, "a snapshot that is over")
    }

    @Test("an answerer busy with other snapshots replies with its count alone: the follower asks again after a backoff that doubles, each follower at its own jittered time, and after the last attempt goes on with what it has")
    func busyAnswerersReplyIsAskedAgainWithBackoff() {
        let reply = WireSnapshotReply(count: 1_500, typePrefix: "org.test.")
        /// The instants (ms after the start) at which a follower drawing `jitter` asks, refused each time.
        func askings(jitter: Double) -> (asked: [Int], synchronized: Bool) {
            var follower = Follower(settings())
            var counter = 0
            follower.makeToken = { counter += 1; return String(format: "%032x", counter) }
            follower.drawJitter = { jitter }
            var topic = subscriptions(follower.follow(["org.test."])).last!.dropFirst()
            var asked: [Int] = [], sequence: UInt64 = 0
            for millisecond in stride(from: 0, through: 8_000, by: 5) {
                let now = start + .milliseconds(millisecond)
                let added = subscriptions(follower.tick(now: now, date: date)).filter { $0.hasPrefix("+S:") }
                if let next = added.first { topic = next.dropFirst(); asked.append(millisecond) }
                guard millisecond == 0 || !added.isEmpty else { continue }
                // The busy answerer replies at once, with its count alone.
                sequence += 1
                _ = hear(&follower, .snapshotReply(reply), from: node("o1"), sequence: sequence, at: Double(millisecond) / 1_000, topic: String(topic))
            }
            return (asked, follower.isSynchronized)
        }
        let calm = askings(jitter: 0), late = askings(jitter: 0.9)
        #expect(calm.asked == [250, 750, 1_750, 3_750], "asked again 250, 500, 1,000 and 2,000 ms after each refusal")
        #expect(late.asked.count == SnapshotRequests.maxAttempts - 1 && zip(calm.asked, late.asked).allSatisfy { $0 < $1 }, "\(late.asked)")
        #expect(calm.synchronized && late.synchronized, "after the last attempt, the refresh fills the rest")
    }

    @Test("a snapshot may bring again the very advertisement heard live (the broker's cached envelope): believed there, a replay anywhere else")
    func snapshotRepeatsWhatWasHeardLive() {
        var follower = Follower(settings())
        follower.makeToken = { "00000000000000000000000000000001" }
        let origin = node("o1")
        _ = follower.follow(["org.test."])
        #expect(events(hear(&follower, advertisement("a", of: origin), from: origin, sequence: 5)) == ["appeared a v1"])
        #expect(ignored(hear(&follower, advertisement("a", of: origin), from: origin, sequence: 5)) == [.replayed])
        let repeated = hear(&follower, advertisement("a", of: origin), from: origin, sequence: 5, topic: "S:00000000000000000000000000000001/org.test.")
        #expect(ignored(repeated).isEmpty && events(repeated).isEmpty, "\(repeated)")
    }

    @Test("unfollowing unsubscribes and ends the prefix's snapshot under way")
    func unfollow() {
        var follower = Follower(settings())
        follower.makeToken = { "000000000000000000000000000000aa" }
        _ = follower.follow(["org.test."])
        #expect(subscriptions(follower.unfollow(["org.test."])) == ["-A:org.test.", "-S:000000000000000000000000000000aa/org.test."])
        #expect(follower.isSynchronized && follower.followed.isEmpty)
    }

    @Test("a presence naming ids not held asks for the snapshots again, at most once a second; a bus reconnection does too; with nothing followed, neither asks")
    func resynchronization() {
        var follower = Follower(settings())
        let origin = node("o1")
        #expect(subscriptions(follower.busReconnected(to: "tcp://broker", now: start)).isEmpty, "nothing followed")
        var counter = 0
        follower.makeToken = { counter += 1; return String(format: "%032x", counter) }
        _ = follower.follow(["org.test."])
        var reply = WireSnapshotReply(count: 0, typePrefix: "org.test.")
        _ = hear(&follower, .snapshotReply(reply), from: node("broker"), sequence: 1, topic: "S:00000000000000000000000000000001/org.test.")
        #expect(follower.isSynchronized)
        let asked = hear(&follower, presence(of: origin, listing: ["lost"]), from: origin, sequence: 1, at: 2, topic: "P:o1")
        #expect(subscriptions(asked) == ["+S:00000000000000000000000000000002/org.test."])
        #expect(rounds(asked) == [.unheldIDs])
        reply.count = 0
        _ = hear(&follower, .snapshotReply(reply), from: node("broker"), sequence: 2, at: 2.1, topic: "S:00000000000000000000000000000002/org.test.")
        #expect(subscriptions(follower.busReconnected(to: "tcp://broker", now: start + .milliseconds(2_500))).isEmpty, "within a second of the last round")
        let putOff = follower.tick(now: start + .seconds(3), date: date)
        #expect(subscriptions(putOff) == ["+S:00000000000000000000000000000003/org.test."], "the round put off")
        #expect(rounds(putOff) == [.reconnected], "counted under what wanted it")
    }

    @Test("a presence after its origin was silent for over half a lease asks for the snapshots again: a change made meanwhile to an activity still held is learnt; presences on time do not ask")
    func latePresenceAsksAgain() {
        var follower = Follower(settings())
        let origin = node("o1")
        var counter = 0
        follower.makeToken = { counter += 1; return String(format: "%032x", counter) }
        _ = follower.follow(["org.test."])
        _ = hear(&follower, .snapshotReply(WireSnapshotReply(count: 0, typePrefix: "org.test.")), from: node("o1"), sequence: 1,
                 topic: "S:00000000000000000000000000000001/org.test.")
        #expect(events(hear(&follower, advertisement("a", of: origin, version: 2), from: origin, sequence: 2, at: 0.5)) == ["appeared a v2"])
        // Presences every 2 s (a lease of 6 s): on time, nothing to ask.
        for (index, at) in [1.0, 3.0, 5.0].enumerated() {
            let actions = hear(&follower, presence(of: origin, listing: ["a"]), from: origin, sequence: UInt64(3 + index), at: at, topic: "P:o1")
            #expect(subscriptions(actions).isEmpty, "a presence on time, at \(at) s")
        }
        // Version 3 goes past this node (sequence 6), and so do the next presences: 4 s of silence.
        let late = hear(&follower, presence(of: origin, listing: ["a"]), from: origin, sequence: 8, at: 9, topic: "P:o1")
        #expect(subscriptions(late) == ["+S:00000000000000000000000000000002/org.test."])
        #expect(rounds(late) == [.silenceEnded])
        // The origin's answer brings version 3 (its envelope's sequence is the one never heard).
        let answer = hear(&follower, advertisement("a", of: origin, version: 3), from: origin, sequence: 6, at: 9.01,
                          topic: "S:00000000000000000000000000000002/org.test.")
        #expect(events(answer) == ["updated a v3"])
    }

    @Test("ids a presence named and a snapshot round did not bring are remembered as not followed while their origin lists them, and forgotten when its presence lapses")
    func unfollowedForgottenWithTheirOrigin() {
        var follower = Follower(settings())
        var counter = 0
        follower.makeToken = { counter += 1; return String(format: "%032x", counter) }
        let origin = node("o1")
        _ = follower.follow(["org.test."])
        let reply = WireSnapshotReply(count: 0, typePrefix: "org.test.")
        _ = hear(&follower, .snapshotReply(reply), from: node("broker"), sequence: 1, topic: "S:00000000000000000000000000000001/org.test.")
        // o1 lists an activity of a type this node does not follow: one round asks, none brings it.
        #expect(subscriptions(hear(&follower, presence(of: origin, listing: ["other-type"]), from: origin, sequence: 1, at: 1, topic: "P:o1")).count == 1)
        _ = hear(&follower, .snapshotReply(reply), from: node("broker"), sequence: 2, at: 1.1, topic: "S:00000000000000000000000000000002/org.test.")
        _ = follower.tick(now: start + .milliseconds(1_200), date: date)
        #expect(follower.resynchronization.unfollowedIDs == 1)
        #expect(subscriptions(hear(&follower, presence(of: origin, listing: ["other-type"]), from: origin, sequence: 2, at: 3, topic: "P:o1")).isEmpty, "not asked about again")
        // o1's presence lapses (6 s lease from 3 s): it left, and so does what was remembered of it.
        _ = follower.tick(now: start + .seconds(10), date: date.addingTimeInterval(10))
        #expect(follower.directory.nodes.isEmpty && follower.resynchronization.unfollowedIDs == 0)
    }

    @Test("past its origin's quota a new activity is ignored and counted, logged once per origin")
    func quota() {
        var follower = Follower(settings(maxPerNode: 2))
        let origin = node("o1")
        for (index, id) in ["a", "b"].enumerated() {
            _ = hear(&follower, advertisement(id, of: origin), from: origin, sequence: UInt64(index + 1))
        }
        let over = hear(&follower, advertisement("c", of: origin), from: origin, sequence: 3)
        #expect(ignored(over) == [.overQuota] && over.count == 2, "counted and logged")
        let again = hear(&follower, advertisement("d", of: origin), from: origin, sequence: 4)
        #expect(ignored(again) == [.overQuota] && again.count == 1, "counted, not logged again")
        #expect(follower.known.count == 2)
    }
}
