import Foundation
import HandoffWire
import SwiftProtobuf
import Testing
@testable import Handoff

/// The operators' view of the bus (``BusView``), with no socket and no real clock: bus messages
/// are built here and fed in at instants advanced by hand.
@Suite("BusView: what the live page and `handoff top` show, from bus messages (no I/O)")
struct BusViewTests {
    let start = ContinuousClock.now
    var sequence: UInt64 = 0

    func node(_ id: String) -> WireNodeRef {
        var ref = WireNodeRef()
        ref.nodeID = id
        ref.name = "name-" + id
        ref.host = "host-" + id
        return ref
    }

    func envelope(_ body: WireEnvelope.OneOf_Body, from sender: WireNodeRef) throws -> [UInt8] {
        try WireEnvelope(body: body, sender: sender, sequence: 1).serializedBytes()
    }

    func presence(_ id: String, activities: [String], partial: Bool = false, traffic: (UInt64, UInt64, UInt64, UInt64)? = nil) throws -> (topic: [UInt8], envelope: [UInt8]) {
        var presence = WireNodePresence()
        presence.node = node(id)
        presence.activityIds = activities
        presence.partial = partial
        presence.leaseMs = 6_000
        if let (messagesIn, bytesIn, messagesOut, bytesOut) = traffic {
            presence.traffic.messagesIn = messagesIn
            presence.traffic.bytesIn = bytesIn
            presence.traffic.messagesOut = messagesOut
            presence.traffic.bytesOut = bytesOut
        }
        return (Array("P:\(id)".utf8), try envelope(.nodePresence(presence), from: node(id)))
    }

    func advertisement(_ activityID: String, type: String, origin: String, topic: String? = nil) throws -> (topic: [UInt8], envelope: [UInt8]) {
        var ad = WireAdvertisement()
        ad.activityID = activityID
        ad.activityType = type
        ad.origin = node(origin)
        ad.title = "title of \(activityID)"
        ad.leaseMs = 6_000
        return (Array((topic ?? "A:\(type)").utf8), try envelope(.advertisement(ad), from: node(origin)))
    }

    func withdrawal(_ activityID: String, type: String, origin: String) throws -> (topic: [UInt8], envelope: [UInt8]) {
        var withdrawal = WireWithdrawal()
        withdrawal.activityID = activityID
        withdrawal.activityType = type
        withdrawal.origin = node(origin)
        return (Array("A:\(type)".utf8), try envelope(.withdrawal(withdrawal), from: node(origin)))
    }

    func streamEvent(_ kind: WireNodeEvent.Kind, from origin: String, id: UInt64, sent: UInt64, expected: UInt64 = 0, detail: String = "") throws -> (topic: [UInt8], envelope: [UInt8]) {
        var event = WireNodeEvent()
        event.kind = kind
        event.activityType = "org.test.doc"
        event.streamID = id
        event.bytesSent = sent
        event.expectedLength = expected
        event.peer = node("peer")
        event.detail = detail
        return (Array("E:org.test.doc".utf8), try envelope(.nodeEvent(event), from: node(origin)))
    }

    func feed(_ view: inout BusView, _ message: (topic: [UInt8], envelope: [UInt8]), at seconds: Double) {
        view.observe(topic: message.topic, envelope: message.envelope, now: start + .milliseconds(Int(seconds * 1000)))
    }

    func at(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int(seconds * 1000)) }

    @Test("nodes come from presence and publications; their traffic and its rate from two presences; activities by type and by how many nodes; a withdrawal and an unlisted id leave the view")
    func nodesTrafficAndActivities() throws {
        var view = BusView(now: start)
        feed(&view, try advertisement("a1", type: "org.test.doc", origin: "n1"), at: 0.1)
        feed(&view, try advertisement("a2", type: "org.test.doc", origin: "n2"), at: 0.2)
        feed(&view, try advertisement("a3", type: "org.test.mail", origin: "n2"), at: 0.3)
        feed(&view, try presence("n1", activities: ["a1"], traffic: (10, 1_000, 5, 500)), at: 1)
        feed(&view, try presence("n1", activities: ["a1"], traffic: (30, 3_000, 9, 900)), at: 3)
        feed(&view, try presence("n2", activities: ["a2", "a3"]), at: 3)
        let snapshot = view.snapshot(source: "test", now: at(3.5))
        #expect(snapshot.nodes.map(\.id) == ["n1", "n2"])
        let n1 = try #require(snapshot.nodes.first)
        #expect(n1.name == "name-n1" && n1.host == "host-n1" && n1.activities == 1 && !n1.gone)
        #expect(n1.publishedMessages == 3, "one advertisement and two presences")
        #expect(n1.traffic?.messagesIn == 30 && n1.traffic?.bytesOut == 900)
        #expect(n1.traffic?.messagesInPerSecond == 10, "20 messages over the 2 s between its presences")
        #expect(n1.traffic?.bytesOutPerSecond == 200)
        #expect(snapshot.nodes[1].traffic == nil, "a presence without traffic (an older node) says nothing of it")
        #expect(snapshot.types == [
            .init(type: "org.test.doc", activities: 2, nodes: 2), .init(type: "org.test.mail", activities: 1, nodes: 1),
        ])

        feed(&view, try withdrawal("a2", type: "org.test.doc", origin: "n2"), at: 4)
        feed(&view, try presence("n2", activities: []), at: 5)
        #expect(view.snapshot(source: "test", now: at(5)).types == [.init(type: "org.test.doc", activities: 1, nodes: 1)],
                "a2 withdrawn, a3 not listed by its origin's presence")
    }

    @Test("a node silent past its lease is shown gone, its activities lapse; a minute later it is dropped")
    func silentNodes() throws {
        var view = BusView(now: start)
        feed(&view, try advertisement("a1", type: "org.test.doc", origin: "n1"), at: 0)
        feed(&view, try presence("n1", activities: ["a1"]), at: 0)
        view.expire(now: at(7))
        let later = view.snapshot(source: "test", now: at(7))
        #expect(later.nodes.first?.gone == true)
        #expect(later.types.isEmpty, "its activity's lease ran out")
        view.expire(now: at(67))
        #expect(view.snapshot(source: "test", now: at(67)).nodes.isEmpty)
    }

    @Test("another subscriber's snapshot answer is traffic, not news; the view's own snapshot answer is; a broker's envelopes are no node")
    func snapshotAnswers() throws {
        let token = String(repeating: "a", count: 32)
        var view = BusView(snapshotToken: token, now: start)
        let other = String(repeating: "b", count: 32)
        feed(&view, try advertisement("theirs", type: "org.test.doc", origin: "n1", topic: "S:\(other)/"), at: 0.1)
        feed(&view, try advertisement("ours", type: "org.test.doc", origin: "n2", topic: "S:\(token)/"), at: 0.2)
        var reply = WireSnapshotReply()
        reply.count = 1
        var broker = WireNodeRef()
        broker.nodeID = "broker@host"
        broker.name = "broker"
        view.observe(topic: Array("S:\(token)/".utf8), envelope: try envelope(.snapshotReply(reply), from: broker), now: at(0.3))
        let snapshot = view.snapshot(source: "test", now: at(0.5))
        #expect(snapshot.types == [.init(type: "org.test.doc", activities: 1, nodes: 1)])
        #expect(snapshot.nodes.isEmpty, "snapshot answers are the broker's replay, not the nodes publishing")
        #expect(snapshot.totalMessages == 3)
    }

    @Test("streams: progress from their nodes' events, finished ones shown 10 s, silent ones dropped after 30 s")
    func streams() throws {
        var view = BusView(now: start)
        feed(&view, try streamEvent(.streamOpened, from: "n1", id: 1, sent: 0, expected: 1_000), at: 0)
        feed(&view, try streamEvent(.streamProgress, from: "n1", id: 1, sent: 400), at: 0.5)
        feed(&view, try streamEvent(.streamOpened, from: "n2", id: 7, sent: 0), at: 0.5)
        let open = view.snapshot(source: "test", now: at(1)).streams
        #expect(open.count == 2)
        #expect(open[0].sent == 400 && open[0].expected == 1_000 && open[0].state == .open && open[0].peer == "name-peer")
        feed(&view, try streamEvent(.streamFailed, from: "n1", id: 1, sent: 600, detail: "peer gone"), at: 2)
        let failed = view.snapshot(source: "test", now: at(2)).streams[0]
        #expect(failed.state == .failed && failed.detail == "peer gone" && failed.sent == 600)
        view.expire(now: at(12.5))
        #expect(view.snapshot(source: "test", now: at(12.5)).streams.map(\.node) == ["name-n2"], "the failed one shown 10 s")
        view.expire(now: at(31))
        #expect(view.snapshot(source: "test", now: at(31)).streams.isEmpty, "silent for 30 s")
    }

    @Test("the chart: one bucket a second over the last minute; seconds without messages are zero, also long after the last one")
    func rates() throws {
        var view = BusView(now: start)
        for index in 0..<5 { feed(&view, try presence("n1", activities: []), at: 0.1 + Double(index) * 0.1) }
        feed(&view, try presence("n1", activities: []), at: 2.5)
        let rates = view.snapshot(source: "test", now: at(3.2)).rates
        #expect(rates.count == 60)
        #expect(rates.suffix(3).map(\.messages) == [5, 0, 1])
        #expect(view.snapshot(source: "test", now: at(3.2)).messagesPerSecond == 0.6)
        let muchLater = view.snapshot(source: "test", now: at(200)).rates
        #expect(muchLater.allSatisfy { $0.messages == 0 }, "\(muchLater.map(\.messages))")
        feed(&view, try presence("n1", activities: []), at: 62.5)
        #expect(view.snapshot(source: "test", now: at(63)).rates.map(\.messages).reduce(0, +) == 1, "the buckets of a minute ago were emptied")
    }

    @Test("bounded: nodes, activities and streams past the limits are counted as overflow, never kept; garbage is counted as malformed")
    func bounds() throws {
        var limits = BusView.Limits()
        limits.nodes = 2
        limits.activities = 3
        limits.streams = 1
        var view = BusView(limits: limits, now: start)
        for index in 0..<50 { feed(&view, try presence("n\(index)", activities: []), at: 0.1) }
        for index in 0..<50 { feed(&view, try advertisement("a\(index)", type: "org.test.doc", origin: "n0"), at: 0.2) }
        for index in 0..<5 { feed(&view, try streamEvent(.streamOpened, from: "n0", id: UInt64(index), sent: 0), at: 0.3) }
        view.observe(topic: Array("A:x".utf8), envelope: [0xFF, 0x01, 0x02], now: at(0.4))
        view.observeMalformed(bytes: 10, now: at(0.4))
        let snapshot = view.snapshot(source: "test", now: at(1))
        #expect(snapshot.nodes.count == 2 && snapshot.types.first?.activities == 3 && snapshot.streams.count == 1)
        #expect(snapshot.overflow == 48 + 47 + 4)
        #expect(snapshot.malformed == 2)
    }

    @Test("a presence renews and drops its own node's activities only, however many others are in view; one past the contract's lengths (a 300-byte name) is counted malformed, never kept")
    func presencesTouchTheirOwn() throws {
        var view = BusView(now: start)
        for index in 0..<2_000 { feed(&view, try advertisement("other-\(index)", type: "org.test.doc", origin: "n\(index % 20 + 1)"), at: 0.1) }
        for index in 0..<3 { feed(&view, try advertisement("mine-\(index)", type: "org.test.doc", origin: "n0"), at: 0.1) }
        // n0 lists two of its three: the third is withdrawn, the others renewed past their lease.
        feed(&view, try presence("n0", activities: ["mine-0", "mine-1"]), at: 5)
        let snapshot = view.snapshot(source: "test", now: at(8))
        #expect(snapshot.types.first?.activities == 2, "n0's renewed two; every other lapsed at 6 s")
        // An activity that changes origin is its new origin's to renew.
        feed(&view, try advertisement("mine-0", type: "org.test.doc", origin: "n1"), at: 8.5)
        feed(&view, try presence("n0", activities: []), at: 9)
        #expect(view.snapshot(source: "test", now: at(9)).types.first?.activities == 1)
        var long = WireNodePresence()
        long.node = node("n-long")
        long.node.name = String(repeating: "x", count: WireLimits.maxNodeName + 44)
        feed(&view, (Array("P:n-long".utf8), try envelope(.nodePresence(long), from: node("n-long"))), at: 9.5)
        let after = view.snapshot(source: "test", now: at(10))
        #expect(after.malformed == 1)
        #expect(!after.nodes.contains { $0.name.utf8.count > WireLimits.maxNodeName })
    }
}
