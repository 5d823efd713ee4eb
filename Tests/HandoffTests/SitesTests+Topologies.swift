import Foundation
import HandoffWire
import Testing
import ZeroMQ
@testable import Handoff
import HandoffTestSupport

/// Sites beyond one hub: more than one level, a pair of hubs, and links misconfigured into a loop.
extension SitesTests {
    @Test("two levels of sites: an activity crosses from a site below a middle hub to a site of the top hub and back, and nothing returns to where it came from")
    func twoLevels() async throws {
        let context = try Context()
        let top = try Broker.start(.init(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context)
        let middle = try Self.site(upstream: top, context: context, name: "middle")
        let (a, b) = (try Self.site(upstream: middle, context: context, name: "a"), try Self.site(upstream: top, context: context, name: "b"))
        try await withNodes([
            Self.node("at-a", at: a, following: ["org.sites."]),
            Self.node("at-b", at: b, following: ["org.sites."]),
        ]) { nodes in
            let (atA, atB) = (nodes[0], nodes[1])
            let fromA = try UserActivity(activityType: "org.sites.edit")
            try await fromA.becomeCurrent(on: atA)
            #expect(await eventually(within: .seconds(5)) { await atB.activities().map(\.id) == [fromA.id] })
            let fromB = try UserActivity(activityType: "org.sites.edit")
            try await fromB.becomeCurrent(on: atB)
            #expect(await eventually(within: .seconds(5)) { await atA.activities().map(\.id) == [fromB.id] })
            #expect(top.counters.cachedActivities == 2 && middle.counters.cachedActivities == 2)
            // A's messages went up twice (to the middle, then the top) and down once (to B); none
            // came back to A or to the middle, and no link carried one round a loop.
            for broker in [top, middle, a, b] {
                #expect(broker.counters.upstreamReturned == 0 && broker.counters.siteLoops == 0 && broker.counters.forged == 0)
            }
            #expect(middle.counters.sitesIn > 0 && top.counters.sitesIn > 0 && a.counters.upstreamIn > 0)
        }
        for broker in [a, b, middle, top] { await broker.stop() }
    }

    @Test("a pair of hubs: sites joined to both hear each message once; one hub gone, the other carries on")
    func pairOfHubs() async throws {
        let context = try Context()
        var (first, second) = (try Broker.start(.init(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context),
                               try Broker.start(.init(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context))
        let (a, b) = (try Self.site(upstream: first, second, context: context, name: "a"), try Self.site(upstream: first, second, context: context, name: "b"))
        // A plain subscriber at site B counts what B's broker passes on of the type.
        let listener = try context.socket(.sub)
        defer { listener.close() }
        try listener.subscribe("A:org.sites.")
        try listener.subscribe("P:")
        try listener.connect(b.backendEndpoint)
        try await withNodes([
            Self.node("at-a", at: a, following: []),
            Self.node("at-b", at: b, following: ["org.sites."]),
        ]) { nodes in
            let (atA, atB) = (nodes[0], nodes[1])
            let activity = try UserActivity(activityType: "org.sites.edit")
            activity.title = "one"
            try await activity.becomeCurrent(on: atA)
            #expect(await eventually(within: .seconds(5)) { await atB.activities().map(\.id) == [activity.id] })
            activity.title = "two"
            #expect(await eventually(within: .seconds(5)) { await atB.activities().first?.title == "two" })
            // Each version's second copy, through the other hub, dropped at B (the slower hub's copy
            // may come past a fixed wait on a loaded machine); then what B passed on.
            #expect(await eventually(within: .seconds(5)) { b.counters.upstreamDuplicates >= 2 })
            var heard = 0
            var presences: [[UInt8]] = []
            try await Task.sleep(for: .milliseconds(300))
            while let topic = try listener.tryReceive() {
                let envelope = topic.hasMore ? try listener.tryReceive() : nil
                if topic.bytes.starts(with: Array("P:".utf8)) {
                    if let envelope { presences.append(envelope.bytes) }
                } else {
                    heard += 1
                }
            }
            // Two versions, each down from both hubs: B's subscribers heard each once, and every
            // presence (A's node's, down from both) once.
            #expect(heard == 2)
            #expect(!presences.isEmpty && Set(presences).count == presences.count, "\(presences.count) presences, \(Set(presences).count) different")
            // (Same versions advertised again, when a link came up, are dropped as well.)
            #expect(b.counters.upstreamDuplicates >= 2)

            // One hub goes away: the other carries what changes.
            await first.stop()
            activity.title = "three"
            #expect(await eventually(within: .seconds(5)) { await atB.activities().first?.title == "three" })
            first = second
        }
        for broker in [a, b, second] { await broker.stop() }
    }

    @Test("a tracer at one site hears the hops of the other site's broker, of the hub and of its own site's broker")
    func traceAcrossSites() async throws {
        let context = try Context()
        let hub = try Broker.start(.init(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context)
        let (a, b) = (try Self.site(upstream: hub, context: context, name: "a"), try Self.site(upstream: hub, context: context, name: "b"))
        try await withNodes([Self.node("author", at: a, following: [])]) { nodes in
            let activity = try UserActivity(activityType: "org.sites.edit")
            try await activity.becomeCurrent(on: nodes[0])
            // The tracer at B, as `handoff trace` does: the type, the hops' topic, then the request
            // (wire.proto, "Tracing").
            let request = TraceRequest(origin: nodes[0].id, traceID: TraceRequest.newTraceID(), activityID: activity.id)
            let tracer = try context.socket(.sub)
            defer { tracer.close() }
            try tracer.subscribe("A:org.sites.")
            try tracer.subscribe(request.hopsTopic)
            try tracer.connect(b.backendEndpoint)
            try await Task.sleep(for: .milliseconds(300))
            try tracer.subscribe(request.topic)
            var brokerHops = 0
            let deadline = WaitDeadline(.seconds(10))
            while !deadline.passed, brokerHops < 9 {
                guard let topic = try tracer.tryReceive() else {
                    try await Task.sleep(for: .milliseconds(20))
                    continue
                }
                guard topic.hasMore, let body = try tracer.tryReceive(), case .traceHop(let hop)? = try? WireEnvelope.decode(body.data).body else { continue }
                if [.brokerReceived, .brokerCached, .brokerForwarded].contains(hop.kind) { brokerHops += 1 }
            }
            // Received, cached and forwarded at A's broker, at the hub and at B's broker.
            #expect(brokerHops >= 9, "the tracer at B heard \(brokerHops) broker hops")
        }
        for broker in [a, b, hub] { await broker.stop() }
    }

    @Test("links misconfigured into a loop (each broker the other's upstream): every message crosses and the loop ends at once")
    func loopOfLinks() async throws {
        let context = try Context()
        let ports = try freePorts(4)
        var x = Broker.Configuration(frontend: ports[0], backend: ports[1])
        x.site = SiteName("x")
        x.upstreams = [.init(frontend: ports[2], backend: ports[3])]
        var y = Broker.Configuration(frontend: ports[2], backend: ports[3])
        y.site = SiteName("y")
        y.upstreams = [.init(frontend: ports[0], backend: ports[1])]
        let (brokerX, brokerY) = (try Broker.start(x, context: context), try Broker.start(y, context: context))
        try await withNodes([
            Self.node("at-x", at: brokerX, following: ["org.sites."]),
            Self.node("at-y", at: brokerY, following: ["org.sites."]),
        ]) { nodes in
            let (atX, atY) = (nodes[0], nodes[1])
            let activity = try UserActivity(activityType: "org.sites.edit")
            try await activity.becomeCurrent(on: atX)
            #expect(await eventually(within: .seconds(5)) { await atY.activities().map(\.id) == [activity.id] })
            // What went round came back to its origin once and was dropped there; the traffic
            // settles to what the nodes themselves send.
            #expect(await eventually(within: .seconds(5)) { brokerX.counters.siteLoops > 0 })
            try await Task.sleep(for: .milliseconds(500))
            let before = brokerX.counters.messagesIn + brokerY.counters.messagesIn
            try await Task.sleep(for: .seconds(1))
            let during = brokerX.counters.messagesIn + brokerY.counters.messagesIn - before
            // Two nodes, a presence each every 200 ms, each taken in on both brokers: about 20 a
            // second, and a few re-advertisements; a message going round would be thousands.
            #expect(during < 200, "the brokers took in \(during) messages in a second")
        }
        for broker in [brokerX, brokerY] { await broker.stop() }
    }
}
