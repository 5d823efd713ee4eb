import Foundation
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
import HandoffTestSupport
@testable import Handoff

@Suite("Tracing one advertisement across the bus (wire.proto, \"Tracing\")")
struct TraceRuleTests {
    static let traceID = "0123456789abcdef0123456789abcdef"

    @Test("a tracer's request names its origin, a 32-digit trace id and the activity; anything else, or another node's, is no request")
    func requests() {
        let request = TraceRequest(origin: "node-1", traceID: Self.traceID, activityID: "A-1/with/slashes")
        #expect(request.topic == "X:node-1/\(Self.traceID)/A-1/with/slashes")
        #expect(request.hopsTopic == "T:\(Self.traceID)")
        #expect(TraceRequest(topic: Array(request.topic.utf8), nodeID: "node-1") == request)
        #expect(TraceRequest(topic: Array(request.topic.utf8), nodeID: "node-2") == nil, "another node's")
        #expect(TraceRequest(topic: Array("X:node-1/0123/A-1".utf8), nodeID: "node-1") == nil, "a short trace id")
        #expect(TraceRequest(topic: Array("X:node-1/\(Self.traceID)/".utf8), nodeID: "node-1") == nil, "no activity")
        #expect(TraceRequest(topic: Array("X:node-1/\(Self.traceID)/\(String(repeating: "a", count: 129))".utf8), nodeID: "node-1") == nil, "over the id limit")
        #expect(TraceRequest(topic: Array("X:node-1/\(String(repeating: "g", count: 32))/A-1".utf8), nodeID: "node-1") == nil, "not hexadecimal")
    }

    @Test("a node answers at most ten tracers' requests a second")
    func limit() {
        var limit = TraceRequestLimit()
        let start = ContinuousClock.now
        let allowed = (0..<15).filter { _ in limit.allow(now: start) }.count
        #expect(allowed == 10)
        let nextSecond = limit.allow(now: start + .milliseconds(1_001))
        #expect(nextSecond)
    }

    func advertisement(traceID: String?, version: UInt64 = 2) throws -> [Frame] {
        var ad = WireAdvertisement()
        ad.activityID = "A-1"
        ad.activityType = "org.test.doc"
        ad.origin.nodeID = "n1"
        ad.version = version
        ad.leaseMs = 6_000
        var envelope = WireEnvelope(body: .advertisement(ad), sender: ad.origin, sequence: 1)
        if let traceID { envelope.traceID = traceID }
        return [Frame(Array("A:org.test.doc".utf8)), Frame(try envelope.serializedBytes() as [UInt8])]
    }

    @Test("the broker reports hops only for a traced envelope (cached when its cache stored it), and passes a tracer's request on to its publishers")
    func broker() throws {
        var broker = WireNodeRef()
        broker.nodeID = "broker@test"
        var core = BrokerCore(cacheEnabled: true, cache: LastValueCache(capacity: 100, perOriginQuota: 10, defaultLease: .seconds(6)), sender: broker)
        let untraced = core.publisherMessage(try advertisement(traceID: nil), connectionKey: nil, now: .now)
        #expect(untraced == .forward(askToReadvertise: nil))
        let traced = core.publisherMessage(try advertisement(traceID: Self.traceID), connectionKey: nil, now: .now)
        #expect(traced == .forward(askToReadvertise: nil, trace: .init(traceID: Self.traceID, activityID: "A-1", cached: true)))
        // An older version than the cache holds is forwarded, but not stored: no cached hop.
        let stale = core.publisherMessage(try advertisement(traceID: Self.traceID, version: 1), connectionKey: nil, now: .now)
        #expect(stale == .forward(askToReadvertise: nil, trace: .init(traceID: Self.traceID, activityID: "A-1", cached: false)))
        let request = TraceRequest(origin: "n1", traceID: Self.traceID, activityID: "A-1")
        let verdict = core.subscriberMessage([Frame([1] + Array(request.topic.utf8))], key: nil, relay: false, now: .now)
        #expect(verdict == .passRequest(topic: Array(request.topic.utf8)))
        let hopBytes = core.traceHop(.brokerCached, .init(traceID: Self.traceID, activityID: "A-1", cached: true), at: Date())
        let hop = try WireEnvelope.decode(hopBytes)
        guard case .traceHop(let decoded) = hop.body else {
            Issue.record("not a hop: \(hop)")
            return
        }
        #expect(decoded.kind == .brokerCached && decoded.traceID == Self.traceID && hop.sender.nodeID == "broker@test")
    }
}

@Suite("`handoff trace` on a real broker and agents", .exclusive, .serialized)
struct TraceProcessTests {
    @Test("the contacts list traced from its origin through the broker to the continuer: every hop in order, with its time and what the follower made of it")
    func traceAcrossProcesses() async throws {
        let deployment = try await ServedDeployment.start(agents: ["origin", "continuer"])
        defer { deployment.stop() }
        let (frontend, backend) = (deployment.frontend, deployment.backend)
        #expect(await deployment.untilHealthy())
        try await deployment.shareContacts(["Ada"], on: "origin")
        // The continuer knows the list before it is traced ("already known at version", below).
        let continuerPort = deployment.agent("continuer").port
        #expect(await eventually(within: .seconds(10)) {
            ((try? httpGet(port: continuerPort, path: "/metrics")).flatMap { metricValue($0.body, "handoff_node_known_activities") } ?? 0) >= 1
        })

        let traced = try await runHandoff(["trace", "--type", "org.handoff.contacts.list", "--broker", frontend, backend, "--json"])
        #expect(traced.status == 0, "\(traced.output) \(traced.error)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(traced.output.utf8)) as? [String: Any], "\(traced.output)")
        let hops = try #require(report["hops"] as? [[String: Any]])
        let steps = hops.map { "\($0["node"] as? String ?? "?") \($0["hop"] as? String ?? "?")" }
        for step in ["origin sent", "broker broker received", "broker broker cached", "broker broker forwarded", "continuer received", "this trace received"] {
            #expect(steps.contains(step), "missing \(step): \(steps)")
        }
        let outcome = try #require(hops.first { $0["node"] as? String == "continuer" && ($0["hop"] as? String ?? "").contains("delivered") }, "\(steps)")
        #expect((outcome["detail"] as? String ?? "").contains("already known at version"), "\(outcome)")
        // In the order they happened, from the origin's send (all on this host's clock).
        let times = hops.map { $0["milliseconds"] as? Double ?? -1 }
        #expect(times == times.sorted() && times.first == 0, "\(hops)")
        let order = ["origin sent", "broker broker received", "broker broker forwarded", "continuer received"].compactMap { steps.firstIndex(of: $0) }
        #expect(order == order.sorted() && order.count == 4, "\(steps)")
        // This command's own subscriber got it after the broker sent it on.
        let here = try #require(steps.firstIndex(of: "this trace received"))
        #expect(here > steps.firstIndex(of: "broker broker forwarded")!, "\(steps)")

        // Text: one line per hop; an activity nobody has is a clear error.
        let text = try await runHandoff(["trace", "--type", "org.handoff.contacts.list", "--broker", frontend, backend])
        #expect(text.status == 0 && text.output.contains("broker forwarded") && text.output.contains(" ms "), "\(text.output)")
        let missing = try await runHandoff(["trace", "--id", "no-such-activity", "--broker", frontend, backend, "--wait", "1"])
        #expect(missing.status != 0 && missing.error.contains("no activity no-such-activity"), "\(missing.error)")
    }

    @Test("a continue traced (`handoff continue --trace`): the originator reports taking the request and answering it, and the stream pairs of the continue (their open and their end), between the continuing node's ask and its restore")
    func continueTraced() async throws {
        let deployment = try await ServedDeployment.start(agents: ["origin"])
        defer { deployment.stop() }
        let (frontend, backend) = (deployment.frontend, deployment.backend)
        #expect(await deployment.untilHealthy())
        try await deployment.shareContacts(["Ada"], on: "origin")
        let data = deployment.folder.appendingPathComponent("continue-data").path
        let traced = try await runHandoff(["continue", "--type", "org.handoff.contacts.list-contacts", "--trace", "--json",
                                           "--data", data, "--wait", "5", "--broker", frontend, backend])
        #expect(traced.status == 0, "\(traced.output) \(traced.error)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(traced.output.utf8)) as? [String: Any], "\(traced.output)")
        let trace = try #require(report["trace"] as? [String: Any], "\(report)")
        #expect((trace["id"] as? String)?.count == 32)
        let hops = try #require(trace["hops"] as? [[String: Any]])
        let steps = hops.map { "\($0["node"] as? String ?? "?") \($0["hop"] as? String ?? "?")" }
        // The contacts plugin's restore pulls the list over a stream pair: its open and end are hops
        // too. The originator's half of the pair may end after this node's restore returned.
        let streamEndsLast = steps.last == "origin stream ended"
        #expect(steps == ["this node asked", "origin continue received", "origin continue answered", "origin stream opened"]
                + (streamEndsLast ? ["this node ended", "origin stream ended"] : ["origin stream ended", "this node ended"]), "\(steps)")
        let details = hops.map { $0["detail"] as? String ?? "" }
        #expect(details[2].hasPrefix("the activity, version ") && details[2].contains("will-save"), "\(details)")
        #expect(details[3].contains("both ways") && details[streamEndsLast ? 5 : 4].hasPrefix("complete: "), "\(details)")
        #expect(details[streamEndsLast ? 4 : 5] == "restored", "\(details)")
        // All on this host's clock: in the order they happened.
        let times = hops.map { $0["milliseconds"] as? Double ?? -1 }
        #expect(times == times.sorted() && times.first == 0, "\(hops)")

        // Text: a line per hop after the outcome; untraced, no trace at all.
        let text = try await runHandoff(["continue", "--type", "org.handoff.contacts.list-contacts", "--trace",
                                         "--data", data, "--broker", frontend, backend])
        #expect(text.status == 0 && text.output.contains("continue answered") && text.output.contains("trace "), "\(text.output)")
        let plain = try await runHandoff(["continue", "--type", "org.handoff.contacts.list-contacts", "--json",
                                          "--data", data, "--broker", frontend, backend])
        #expect(plain.status == 0 && !plain.output.contains("\"trace\""), "\(plain.output)")
        #expect(try await runHandoff(["continue", "--type", "x", "--trace", "--agent", "ipc:///nonexistent"]).error.contains("--trace works here"))

        // With --save, the list comes over a stream: its open and its end are traced too.
        let file = deployment.folder.appendingPathComponent("saved.pb").path
        let saved = try await runHandoff(["continue", "--type", "org.handoff.contacts.list-contacts", "--trace", "--json", "--save", file,
                                          "--broker", frontend, backend])
        #expect(saved.status == 0, "\(saved.output) \(saved.error)")
        let savedReport = try #require(try JSONSerialization.jsonObject(with: Data(saved.output.utf8)) as? [String: Any], "\(saved.output)")
        let savedHops = try #require((savedReport["trace"] as? [String: Any])?["hops"] as? [[String: Any]], "\(savedReport)")
        let savedSteps = savedHops.map { "\($0["node"] as? String ?? "?") \($0["hop"] as? String ?? "?")" }
        #expect(savedSteps == ["this node asked", "origin continue received", "origin continue answered", "origin stream opened"]
                + (savedSteps.last == "origin stream ended" ? ["this node ended", "origin stream ended"] : ["origin stream ended", "this node ended"]),
                "\(savedSteps)")
        let savedTimes = savedHops.map { $0["milliseconds"] as? Double ?? -1 }
        #expect(savedTimes == savedTimes.sorted(), "\(savedHops)")
        let ended = savedHops.first { $0["hop"] as? String == "stream ended" }?["detail"] as? String ?? ""
        #expect(ended.hasPrefix("complete: \(savedReport["bytes"] as? Int ?? -1) bytes sent"), "\(ended), \(savedReport)")
    }
}
