import Foundation
import Testing
import ZeroMQ
@testable import Handoff
import HandoffTestSupport

/// Subscribers' requests for the publishers (`R:`, `X:`; PublisherRequests): checked for their
/// shape, held to a budget per key, and passed on subscribed and withdrawn at once.
@Suite("Broker: subscribers' requests for the publishers")
struct PublisherRequestsTests {
    private static let start = ContinuousClock.now

    @Test("rule: a request has the contract's shape: R: + a node id of 1 to 128 bytes (not R:*), X: + origin / trace id / activity id")
    func shapes() {
        func wellFormed(_ topic: String) -> Bool { PublisherRequests.isWellFormed(Array(topic.utf8)) }
        let trace = TraceRequest(origin: "n1", traceID: TraceRequest.newTraceID(), activityID: "A-1")
        #expect(wellFormed("R:node-1") && wellFormed(trace.topic))
        #expect(!wellFormed("R:") && !wellFormed("R:" + String(repeating: "n", count: 129)))
        #expect(!wellFormed("X:n1") && !wellFormed("X:n1/not-a-trace-id/A-1") && !wellFormed("X:/\(trace.traceID)/A-1"))
        #expect(PublisherRequests.isRequest(Array("R:n".utf8)) && PublisherRequests.isRequest(Array("X:n".utf8)))
        #expect(!PublisherRequests.isRequest(Array("R:*token".utf8)) && !PublisherRequests.isRequest(Array("A:org.".utf8)))
    }

    @Test("rule: fifty at once per key, then ten a second; a relay's without count; an open broker's subscribers share a thousand a second after five thousand")
    func budget() {
        var requests = PublisherRequests()
        let (member, other) = (Array("member".utf8), Array("other".utf8))
        let burst = (0..<60).filter { _ in requests.admit(key: member, relay: false, now: Self.start) }.count
        #expect(burst == 50)
        let otherAdmitted = requests.admit(key: other, relay: false, now: Self.start)
        #expect(otherAdmitted, "another key has its own")
        let afterASecond = (0..<20).filter { _ in requests.admit(key: member, relay: false, now: Self.start + .seconds(1)) }.count
        #expect(afterASecond == 10)
        let relayed = (0..<1_000).filter { _ in requests.admit(key: member, relay: true, now: Self.start) }.count
        #expect(relayed == 1_000)
        let open = (0..<6_000).filter { _ in requests.admit(key: nil, relay: false, now: Self.start) }.count
        #expect(open == 5_000)
    }

    @Test("rule: the broker passes a request on once, withdrawn at once, and counts those malformed or past the budget; a request's withdrawal goes nowhere")
    func coreVerdicts() {
        var core = BrokerCore(
            cacheEnabled: true, cache: LastValueCache(capacity: 10, perOriginQuota: 10, defaultLease: .seconds(6)),
            sender: NodeInfo(id: "broker", name: "broker", host: "h", publicKey: nil).wire)
        let key = Array("member".utf8)
        func verdict(_ action: UInt8, _ topic: String) -> BrokerCore.SubscriberVerdict {
            core.subscriberMessage([Frame([action] + Array(topic.utf8))], key: key, relay: false, now: Self.start)
        }
        #expect(verdict(1, "R:node-1") == .passRequest(topic: Array("R:node-1".utf8)))
        #expect(verdict(0, "R:node-1") == .keep)
        #expect(verdict(1, "R:") == .keep && core.counters.requestsRefused == 1)
        for index in 0..<60 { _ = verdict(1, "R:node-\(index)") }
        #expect(core.counters.requestsRefused == 1 + 60 - 49)
    }

    @Test("a member flooding R: requests over CURVE: the publishers hear 50 of them (the burst), each withdrawn at once, so none stands; the rest are counted")
    func floodOverCurve() async throws {
        let account = try TestAccount()
        let broker = try secureBroker(account)
        let context = try Context()
        // A publisher that hears the subscriptions the broker passes to its publishers.
        let publisher = try context.socket(.xpub)
        try account.security(account.b).secureClient(publisher, serverKey: account.broker.publicKey)
        try publisher.connect(broker.frontendEndpoint)
        // The broker's own subscribe-all first: the frontend is connected (as long as the start of
        // the parallel pass takes, as in connectPublisher).
        var heard: [String] = []
        while heard.isEmpty {
            guard let frame = try await publisher.receive(timeout: .seconds(20)) else { break }
            heard.append(String(decoding: frame.bytes, as: UTF8.self))
        }
        #expect(heard == ["\u{1}"], "the broker's subscribe-all")
        let member = try context.socket(.sub)
        try account.security(account.a).secureClient(member, serverKey: account.broker.publicKey)
        for index in 0..<200 { try member.subscribe("R:node-\(index)") }
        let connected = ContinuousClock.now
        try member.connect(broker.backendEndpoint)
        try await waitUntil(within: .seconds(5)) { broker.counters.subscriptions >= 200 }
        let arriving = ContinuousClock.now - connected
        var subscribed: [String: Int] = [:], withdrawn: [String: Int] = [:]
        while let frame = try await publisher.receive(timeout: .milliseconds(300)) {
            let topic = String(decoding: frame.bytes.dropFirst(), as: UTF8.self)
            if frame.bytes.first == 1 { subscribed[topic, default: 0] += 1 } else { withdrawn[topic, default: 0] += 1 }
        }
        let passed = subscribed.values.reduce(0, +)
        // Fifty at once, and ten a second while the subscriptions arrived (a second at most on an
        // idle machine, longer on a loaded one: the bound is counted from how long they took).
        let refilled = 10 * (Int((arriving / .seconds(1)).rounded(.up)) + 1)
        #expect(passed >= 50 && passed <= 50 + max(20, refilled), "\(passed) passed in \(arriving)")
        #expect(subscribed == withdrawn, "each withdrawn at once: none stands at the publishers")
        #expect(broker.counters.requestsRefused == 200 - passed)
        member.close()
        publisher.close()
        await broker.stop()
    }
}
