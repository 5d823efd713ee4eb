import Foundation
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
@testable import Handoff

/// A publisher that sets a trace id on everything it publishes: the broker and the nodes that
/// receive it report hops for at most ten traced envelopes a second each, and none for a
/// malformed trace id (wire.proto, "Tracing").
@Suite("Traced envelopes in a flood: hops bounded")
struct TraceFloodTests {
    private static func traced(_ index: Int, traceID: String) throws -> BusMessage {
        var message = try BusMessage.advertisement(id: "flood-\(index)", type: "org.test.flood.doc")
        var envelope = try WireEnvelope(serializedBytes: message.envelope)
        envelope.traceID = traceID
        message.envelope = try envelope.serializedBytes()
        return message
    }

    /// Publishes an advertisement of `id` every 100 ms until `follower` believes it (its
    /// subscription is in place).
    private func advertiseUntilBelieved(_ id: String, type: String, by follower: Node, publishing publisher: Socket) async throws {
        let probe = try BusMessage.advertisement(id: id, type: type)
        let deadline = WaitDeadline(.seconds(20))
        while !deadline.passed {
            try await publish(probe, on: publisher)
            if await eventually(within: .milliseconds(100), { await follower.activities().contains { $0.id == id } }) { return }
        }
        Issue.record("the follower never believed the probe: its subscription never reached the broker")
        throw CancellationError()
    }

    @Test("300 traced advertisements at once, 100 with a malformed trace id: the broker reports at most ten traces' hops, the following node at most ten's, and every advertisement is still believed")
    func hopsBounded() async throws {
        let context = try Context()
        let broker = try Broker.start(Broker.Configuration(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context)
        try await withNodes([nodeOnBroker("follower", broker: broker, security: nil)]) { nodes in
            let follower = nodes[0]
            let events = await follower.discover(.type(prefix: "org.test.flood."))
            // The tap's subscriptions are in place once the follower's presence reaches it through
            // the broker; the follower's, once it believes a probe published until it does (a fixed
            // wait for both need not hold on a loaded machine).
            let tap = try context.socket(.sub)
            try tap.set(.receiveHighWaterMark, 0)
            try tap.subscribe(Topic.tracePrefix)
            try await untilPresence(of: follower.id, reaches: tap) { try tap.connect(broker.backendEndpoint) }
            let publisher = try await connectPublisher(to: broker, context: context)
            try await advertiseUntilBelieved("flood-probe", type: "org.test.flood.probe", by: follower, publishing: publisher)
            for index in 0..<300 {
                let id = index < 200 ? TraceRequest.newTraceID() : TraceRequest.newTraceID().uppercased()
                try await publish(try Self.traced(index, traceID: id), on: publisher)
            }
            #expect(await eventually { await follower.activities().count == 301 }, "the flood's advertisements are believed as untraced ones")
            try await Task.sleep(for: .milliseconds(300))
            var fromBroker = 0, fromFollower = 0
            while let frames = try await receiveMessage(tap, timeout: .seconds(1)), frames.count >= 2 {
                let hop = try WireEnvelope(serializedBytes: frames[1].bytes)
                if hop.sender.nodeID == follower.id { fromFollower += 1 } else { fromBroker += 1 }
            }
            // Received, cached and forwarded a trace at the broker; received and its outcome at the node.
            #expect(fromBroker >= 3 && fromBroker <= 3 * 2 * TraceRequestLimit.perSecond, "\(fromBroker) hops from the broker")
            #expect(fromFollower >= 2 && fromFollower <= 2 * 2 * TraceRequestLimit.perSecond, "\(fromFollower) hops from the follower")
            withExtendedLifetime(events) {}
        }
    }
}
