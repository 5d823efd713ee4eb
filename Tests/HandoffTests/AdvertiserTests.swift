import Foundation
import HandoffWire
import SwiftProtobuf
import Testing
@testable import Handoff

/// The originating side's rules on ``Advertiser``, with no socket and no real clock: time is an
/// instant advanced by hand.
@Suite("Advertiser: what the bus hears of a node's own activities, and when (no I/O)")
struct AdvertiserTests {
    let start = ContinuousClock.now
    let settings: Advertiser.Settings = {
        var origin = WireNodeRef()
        origin.nodeID = "origin-1"
        origin.name = "origin"
        return Advertiser.Settings(
            origin: origin, continueEndpoint: "tcp://10.0.0.1:7000", lease: .seconds(6), teamID: nil,
            advertiseInterval: .seconds(2), refreshInterval: .seconds(25))
    }()

    func activity(_ type: String = "org.handoff.test.edit") throws -> UserActivity {
        let activity = try UserActivity(activityType: type)
        activity.title = "a title"
        return activity
    }

    func advertised(_ messages: [Advertiser.Message]) -> [String] {
        messages.compactMap { if case .advertisement(let a) = $0.body { a.activityID } else { nil } }
    }

    func withdrawn(_ messages: [Advertiser.Message]) -> [(id: String, reason: WireWithdrawal.Reason)] {
        messages.compactMap { if case .withdrawal(let w) = $0.body { (w.activityID, w.reason) } else { nil } }
    }

    func presences(_ messages: [Advertiser.Message]) -> [WireNodePresence] {
        messages.compactMap { if case .nodePresence(let p) = $0.body { p } else { nil } }
    }

    @Test("becoming current advertises it under A: + its type; a change advertises it again; while not eligible for Handoff it is withdrawn instead; ids no longer current are skipped")
    func addAndChange() throws {
        var advertiser = Advertiser(settings, now: start)
        let edit = try activity()
        let added = [advertiser.add(edit)]
        #expect(advertised(added) == [edit.id])
        #expect(added.first?.topic == Array("A:org.handoff.test.edit".utf8))
        if case .advertisement(let a) = added.first?.body {
            #expect(a.continueEndpoint == "tcp://10.0.0.1:7000" && a.leaseMs == 6_000 && a.origin.nodeID == "origin-1")
        }
        let changed = advertiser.changed([edit.id, "gone"])
        #expect(advertised(changed) == [edit.id])
        edit.isEligibleForHandoff = false
        let hidden = advertiser.changed([edit.id])
        #expect(withdrawn(hidden).map(\.id) == [edit.id] && advertised(hidden).isEmpty)
    }

    @Test("contract: a current activity changed past the text limit (16,384 bytes of type, title, keywords, webpage URL) is withdrawn and left out of presences and snapshots; changed back, it is advertised and listed again")
    func oversizedChangeWithdrawn() throws {
        var advertiser = Advertiser(settings, now: start)
        let edit = try activity()
        _ = advertiser.add(edit)
        edit.title = String(repeating: "t", count: WireLimits.maxAdvertisedText)
        let oversized = advertiser.changed([edit.id])
        #expect(withdrawn(oversized).map(\.id) == [edit.id] && advertised(oversized).isEmpty)
        let presence = presences(advertiser.tick(now: start + .seconds(2), date: Date()).messages)
        #expect(presence.count == 1 && presence.first?.activityIds.isEmpty == true, "listed, followers would ask for it again and again")
        let topic = Array(Topic.snapshot(token: Topic.newSnapshotToken(), typePrefix: "org.").utf8)
        let snapshot = advertiser.subscribed(to: topic[...], bus: .direct, now: start + .seconds(2)).messages
        #expect(advertised(snapshot).isEmpty)
        #expect(snapshot.contains { if case .snapshotReply(let reply) = $0.body { reply.count == 0 } else { false } }, "counted, the asker would ask again")
        edit.title = "short again"
        #expect(advertised(advertiser.changed([edit.id])) == [edit.id])
        #expect(presences(advertiser.tick(now: start + .seconds(4), date: Date()).messages).first?.activityIds == [edit.id])
    }

    @Test("a presence fits the 64 KiB frame however long the node's name and host: the list is cut (partial), not the presence lost")
    func presenceFitsWithLongNames() throws {
        var long = settings
        long.origin.name = String(repeating: "n", count: 12_000)
        long.origin.host = String(repeating: "h", count: 8_000)
        var advertiser = Advertiser(long, now: start)
        for _ in 0..<1_500 { _ = advertiser.add(try activity()) }
        let presence = try #require(presences(advertiser.tick(now: start + .seconds(2), date: Date()).messages).first)
        #expect(presence.partial)
        let envelope = WireEnvelope(body: .nodePresence(presence), sender: long.origin, sequence: 1)
        let bytes: [UInt8] = try envelope.serializedBytes()
        #expect(bytes.count <= WireLimits.maxBusFrame, "\(bytes.count) bytes: over the frame limit, the node would not send it at all")
    }

    @Test("each message goes under its own activity's type, whichever type went before (the topic kept for the last type)")
    func topicPerType() throws {
        var advertiser = Advertiser(settings, now: start)
        let edit = try activity(), view = try activity("org.handoff.test.view"), edit2 = try activity()
        let topics = [advertiser.add(edit), advertiser.add(view), advertiser.add(edit2)].map { String(decoding: $0.topic, as: UTF8.self) }
        #expect(topics == ["A:org.handoff.test.edit", "A:org.handoff.test.view", "A:org.handoff.test.edit"])
        let withdrawal = advertiser.remove(view, reason: .resigned)
        #expect(withdrawal.map { String(decoding: $0.topic, as: UTF8.self) } == ["A:org.handoff.test.view"])
        let again = advertiser.changed([edit.id, edit2.id])
        #expect(again.map { String(decoding: $0.topic, as: UTF8.self) } == ["A:org.handoff.test.edit", "A:org.handoff.test.edit"])
    }

    @Test("removal withdraws once, with its reason; removing what is not current says nothing")
    func removal() throws {
        var advertiser = Advertiser(settings, now: start)
        let edit = try activity()
        _ = advertiser.add(edit)
        let removed = advertiser.remove(edit, reason: .resigned)
        #expect(withdrawn(removed).map(\.id) == [edit.id] && withdrawn(removed).first?.reason == RemovalReason.resigned.wire)
        #expect(advertiser.remove(edit, reason: .resigned).isEmpty)
        #expect(advertiser.current.count == 0)
    }

    @Test("a presence every advertise interval and nothing before it; it lists the eligible current ids, the lease and the continue endpoint, under P: + the node id")
    func presenceSchedule() throws {
        var advertiser = Advertiser(settings, now: start)
        let (shown, hidden) = (try activity(), try activity("org.handoff.test.hidden"))
        hidden.isEligibleForHandoff = false
        _ = advertiser.add(shown)
        _ = advertiser.add(hidden)
        #expect(advertiser.nextPresence == start + .seconds(2))
        #expect(!advertiser.tick(now: start + .seconds(1), date: Date()).presence)
        let tick = advertiser.tick(now: start + .seconds(2), date: Date())
        #expect(tick.presence && tick.expired.isEmpty && tick.note == nil)
        #expect(tick.messages.count == 1, "a presence alone before the refresh is due")
        let presence = try #require(presences(tick.messages).first)
        #expect(presence.activityIds == [shown.id] && presence.leaseMs == 6_000 && !presence.partial)
        #expect(presence.continueEndpoint == "tcp://10.0.0.1:7000")
        #expect(tick.messages.last?.topic == Array("P:origin-1".utf8))
        #expect(advertiser.nextPresence == start + .seconds(4))
        #expect(!advertiser.tick(now: start + .seconds(3), date: Date()).presence)
    }

    @Test("every current activity is advertised again at the refresh interval, before that presence")
    func refresh() throws {
        var advertiser = Advertiser(settings, now: start)
        let (a, b) = (try activity(), try activity("org.handoff.test.other"))
        _ = advertiser.add(a)
        _ = advertiser.add(b)
        var refreshed: [String] = []
        var now = start
        while now < start + .seconds(25) {
            now = advertiser.nextPresence
            let tick = advertiser.tick(now: now, date: Date())
            refreshed += advertised(tick.messages)
            if now < start + .seconds(25) { #expect(advertised(tick.messages).isEmpty, "nothing refreshed at \(now - start)") }
        }
        #expect(Set(refreshed) == [a.id, b.id] && refreshed.count == 2)
    }

    @Test("a pass over every activity (the refresh, a broker's subscribe-all) goes out in slices of bulkSlice every bulkPace, each activity once and as it is then; one no longer current is skipped; a new pass starts over")
    func passesInSlices() throws {
        var advertiser = Advertiser(settings, now: start)
        let slice = Advertiser.bulkSlice, pace = Advertiser.bulkPace
        let activities = try (0..<(2 * slice + slice / 2)).map { _ in try activity() }
        for activity in activities { _ = advertiser.add(activity) }
        let bus = Advertiser.Bus.brokered(readvertiseTopic: Array("R:origin-1".utf8))
        let sent = advertised(advertiser.subscribed(to: [][...], bus: bus, now: start).messages)
        #expect(sent == activities.prefix(slice).map(\.id))
        #expect(advertiser.nextSlice == start + pace && advertiser.nextDue == start + pace)
        #expect(advertiser.tick(now: start + pace / 2, date: Date()).messages.isEmpty, "nothing before the slice is due")
        let second = advertiser.tick(now: start + pace, date: Date())
        #expect(!second.presence && advertised(second.messages) == activities[slice..<(2 * slice)].map(\.id))
        _ = advertiser.remove(activities.last!, reason: .resigned)
        activities[2 * slice].title = "changed meanwhile"
        let last = advertiser.tick(now: start + pace * 2, date: Date()).messages
        #expect(advertised(last) == activities[(2 * slice)...].dropLast().map(\.id), "the last slice, without the one no longer current")
        if case .advertisement(let first) = last.first?.body { #expect(first.title == "changed meanwhile", "as it is when its slice goes") }
        #expect(advertiser.nextSlice == nil && advertiser.nextDue == advertiser.nextPresence)

        // The refresh is a pass too; a broker's subscribe-all meanwhile starts it over.
        var now = start
        var refresh = Advertiser.Tick()
        while advertised(refresh.messages).isEmpty {
            now = advertiser.nextDue
            refresh = advertiser.tick(now: now, date: Date())
        }
        #expect(refresh.presence && advertised(refresh.messages).count == slice)
        let over = advertiser.subscribed(to: [][...], bus: bus, now: now + pace / 2).messages
        #expect(over.isEmpty && advertiser.nextSlice == now + pace, "the new pass waits for the slice that is due")
        #expect(advertised(advertiser.tick(now: now + pace, date: Date()).messages) == activities.prefix(slice).map(\.id))
    }

    @Test("a batch made current at once is current at once; its first slice is advertised at once, the rest a slice per bulkPace ahead of a pass over every activity; a presence meanwhile lists only what was advertised; one resigned before its slice is not advertised")
    func batchInSlices() throws {
        var settings = settings
        settings.sliceSize = 3
        var advertiser = Advertiser(settings, now: start)
        let pace = Advertiser.bulkPace
        let batch = try (0..<8).map { _ in try activity() }
        #expect(advertised(advertiser.addAll(batch, now: start)) == batch.prefix(3).map(\.id))
        #expect(advertiser.current.count == 8 && advertiser.nextSlice == start + pace)
        let presence = try #require(presences([advertiser.presence()]).first)
        #expect(presence.activityIds.sorted() == batch.prefix(3).map(\.id).sorted(), "not yet advertised, not yet listed: a follower would ask for what it missed")
        _ = advertiser.remove(batch[4], reason: .resigned)
        let bus = Advertiser.Bus.brokered(readvertiseTopic: Array("R:origin-1".utf8))
        #expect(advertiser.subscribed(to: [][...], bus: bus, now: start + pace / 2).messages.isEmpty, "a pass over every activity waits for the slice that is due")
        #expect(advertised(advertiser.tick(now: start + pace, date: Date()).messages) == [batch[3], batch[5], batch[6]].map(\.id))
        let third = advertised(advertiser.tick(now: start + pace * 2, date: Date()).messages)
        #expect(third.first == batch[7].id && third.count == 3, "the batch's last, then the pass over every activity")
        #expect(advertiser.awaitingFirstAdvertisement.isEmpty)
        #expect(try #require(presences([advertiser.presence()]).first).activityIds.count == 7)

        // A batch of a slice or less goes out whole, at once, even while a pass is under way.
        let small = try (0..<3).map { _ in try activity() }
        #expect(advertised(advertiser.addAll(small, now: start + pace * 2)) == small.map(\.id))
        #expect(advertiser.awaitingFirstAdvertisement.isEmpty)
    }

    @Test("a direct peer's snapshot of more than a slice is answered in slices, its reply after the last one counting what went; it goes before a pass over every activity; past the most answers under way, a reply alone says what there is")
    func snapshotsInSlices() throws {
        var advertiser = Advertiser(settings, now: start)
        let slice = Advertiser.bulkSlice, pace = Advertiser.bulkPace
        let activities = try (0..<(slice + slice / 2)).map { _ in try activity() }
        for activity in activities { _ = advertiser.add(activity) }
        func replies(_ messages: [Advertiser.Message]) -> [UInt32] {
            messages.compactMap { if case .snapshotReply(let r) = $0.body { r.count } else { nil } }
        }
        let topic = Array(Topic.snapshot(token: Topic.newSnapshotToken(), typePrefix: "org.").utf8)
        let first = advertiser.subscribed(to: topic[...], bus: .direct, now: start).messages
        #expect(advertised(first) == activities.prefix(slice).map(\.id) && replies(first).isEmpty)
        #expect(advertiser.nextSlice == start + pace)
        // An activity ended meanwhile is skipped and not counted; a pass over every activity begun
        // meanwhile waits for the due slice, and goes after the snapshot's answer.
        _ = advertiser.remove(activities.last!, reason: .resigned)
        #expect(advertiser.readvertise(now: start + pace / 2, askedByBroker: false).messages.isEmpty)
        let second = advertiser.tick(now: start + pace, date: Date()).messages
        let answer = second.filter { $0.topic == topic }, pass = second.filter { $0.topic != topic }
        #expect(advertised(answer) == activities[slice...].dropLast().map(\.id))
        #expect(replies(answer) == [UInt32(activities.count - 1)] && replies([answer.last!]).count == 1, "the reply last, counting every slice")
        #expect(second.count == slice && advertised(pass) == activities.prefix(slice - answer.count).map(\.id))
        let third = advertiser.tick(now: start + pace * 2, date: Date()).messages
        #expect(advertised(third) == activities[(slice - answer.count)...].dropLast().map(\.id))
        #expect(advertiser.nextSlice == nil)

        // At most maxSnapshotAnswers under way: one more hears at once how many match, with none.
        var asked = 0
        while advertiser.passes.count < Advertiser.maxSnapshotAnswers {
            let another = Array(Topic.snapshot(token: Topic.newSnapshotToken(), typePrefix: "org.").utf8)
            asked += 1
            _ = advertiser.subscribed(to: another[...], bus: .direct, now: start + pace * 2)
        }
        #expect(asked == Advertiser.maxSnapshotAnswers)
        let refused = advertiser.subscribed(to: topic[...], bus: .direct, now: start + pace * 2).messages
        #expect(advertised(refused).isEmpty && replies(refused) == [UInt32(activities.count - 1)])
        #expect(advertiser.snapshotsAnsweredBusy == 1, "counted, for the node's metric")
        #expect(advertiser.passes.count == Advertiser.maxSnapshotAnswers)
        // The busy count is taken once a while, not per request: an activity made current meanwhile
        // is counted once the count's lifetime is over.
        _ = advertiser.add(try activity())
        let soon = start + pace * 2 + Advertiser.busyCountLifetime / 2, later = start + pace * 2 + Advertiser.busyCountLifetime
        let again = advertiser.subscribed(to: topic[...], bus: .direct, now: soon).messages
        #expect(replies(again) == [UInt32(activities.count - 1)], "the count kept")
        let after = advertiser.subscribed(to: topic[...], bus: .direct, now: later).messages
        #expect(replies(after) == [UInt32(activities.count)], "taken anew")
    }

    @Test("a presence later than a lease (the node stalled) advertises every activity again, and says why")
    func stalled() throws {
        var advertiser = Advertiser(settings, now: start)
        let edit = try activity()
        _ = advertiser.add(edit)
        _ = advertiser.tick(now: start + .seconds(2), date: Date())
        let late = advertiser.tick(now: start + .seconds(9), date: Date())
        #expect(advertised(late.messages) == [edit.id] && presences(late.messages).count == 1)
        #expect(late.note?.contains("7.0 s late") == true, "\(late.note ?? "no note")")
        let onTime = advertiser.tick(now: start + .seconds(11), date: Date())
        #expect(advertised(onTime.messages).isEmpty && onTime.note == nil)
    }

    @Test("an activity past its expiration date goes at the next presence: withdrawn as expired, handed to the node to let go, and a late request hears it expired")
    func expiry() throws {
        var advertiser = Advertiser(settings, now: start)
        let (expiring, staying) = (try activity(), try activity("org.handoff.test.stays"))
        let wallClock = Date(timeIntervalSince1970: 2_000_000_000)
        expiring.expirationDate = wallClock.addingTimeInterval(1)
        _ = advertiser.add(expiring)
        _ = advertiser.add(staying)
        #expect(advertiser.tick(now: start + .seconds(2), date: wallClock).expired.isEmpty)
        let tick = advertiser.tick(now: start + .seconds(4), date: wallClock.addingTimeInterval(1))
        #expect(tick.expired.map(\.id) == [expiring.id])
        #expect(withdrawn(tick.messages).map(\.id) == [expiring.id] && withdrawn(tick.messages).first?.reason == RemovalReason.expired.wire)
        #expect(presences(tick.messages).first?.activityIds == [staying.id], "the presence after the withdrawal lists what stays")
        #expect(advertiser.current.endedReason(expiring.id) == .activityExpired)
    }

    @Test("a broker's subscribe-all advertises everything again; its R: request is honoured at most once a second; any other subscription gets nothing")
    func brokerSubscriptions() throws {
        var advertiser = Advertiser(settings, now: start)
        let edit = try activity()
        _ = advertiser.add(edit)
        let ask: [UInt8] = Array("R:origin-1".utf8)
        let bus = Advertiser.Bus.brokered(readvertiseTopic: ask)
        #expect(advertised(advertiser.subscribed(to: [][...], bus: bus, now: start).messages) == [edit.id])
        let asked = advertiser.subscribed(to: ask[...], bus: bus, now: start + .seconds(1))
        #expect(advertised(asked.messages) == [edit.id] && asked.note?.contains("a broker lost") == true)
        #expect(advertiser.subscribed(to: ask[...], bus: bus, now: start + .milliseconds(1_500)).messages.isEmpty, "asked again within a second")
        #expect(advertised(advertiser.subscribed(to: ask[...], bus: bus, now: start + .seconds(2)).messages) == [edit.id])
        #expect(advertiser.subscribed(to: Array("R:someone-else".utf8)[...], bus: bus, now: start + .seconds(9)).messages.isEmpty)
        #expect(advertiser.subscribed(to: Array("A:org".utf8)[...], bus: bus, now: start + .seconds(9)).messages.isEmpty)
    }

    @Test("a direct peer's snapshot subscription gets the matching eligible activities under its own topic, then a reply that counts them; a plain or malformed one gets nothing")
    func directSnapshots() throws {
        var advertiser = Advertiser(settings, now: start)
        let (edit, view, hidden, other) = (try activity("org.handoff.test.edit"), try activity("org.handoff.test.view"),
                                          try activity("org.handoff.test.hidden"), try activity("com.example.other"))
        hidden.isEligibleForHandoff = false
        for a in [edit, view, hidden, other] { _ = advertiser.add(a) }
        let topic = Array(Topic.snapshot(token: Topic.newSnapshotToken(), typePrefix: "org.handoff.test.").utf8)
        let answer = advertiser.subscribed(to: topic[...], bus: .direct, now: start).messages
        #expect(Set(advertised(answer)) == [edit.id, view.id])
        #expect(answer.allSatisfy { $0.topic == topic })
        guard case .snapshotReply(let reply) = answer.last?.body else {
            Issue.record("the answer does not end with a SnapshotReply")
            return
        }
        #expect(reply.count == 2 && reply.typePrefix == "org.handoff.test.")
        #expect(advertiser.subscribed(to: Array("A:org.handoff.test.".utf8)[...], bus: .direct, now: start).messages.isEmpty)
        #expect(advertiser.subscribed(to: Array("S:nothex".utf8)[...], bus: .direct, now: start).messages.isEmpty)
    }

    @Test("a continue-once activity, once continued, is withdrawn as invalidated, and a later request hears it was already continued; at shutdown every activity is withdrawn as such")
    func continuedOnceAndShutdown() throws {
        var advertiser = Advertiser(settings, now: start)
        let (once, other) = (try activity(), try activity("org.handoff.test.other"))
        _ = advertiser.add(once)
        _ = advertiser.add(other)
        let continued = advertiser.continuedOnce(once)
        #expect(withdrawn(continued).map(\.id) == [once.id] && withdrawn(continued).first?.reason == RemovalReason.invalidated.wire)
        #expect(advertiser.current.endedReason(once.id) == .alreadyContinued)
        let (left, withdrawals) = advertiser.removeAll()
        #expect(left.map(\.id) == [other.id])
        #expect(withdrawn(withdrawals).map(\.id) == [other.id] && withdrawn(withdrawals).first?.reason == RemovalReason.nodeShutdown.wire)
        #expect(presences([advertiser.presence()]).first?.activityIds == [])
    }
}
