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

    @Test("300 traced advertisements at once, 100 with a malformed trace id: the broker reports at most ten traces' hops, the following node at most ten's, and every advertisement is still believed")
    func hopsBounded() async throws {
        let context = try Context()
        let broker = try Broker.start(Broker.Configuration(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context)
        try await withNodes([nodeOnBroker("follower", broker: broker, security: nil)]) { nodes in
            let follower = nodes[0]
            let events = await follower.discover(.type(prefix: "org.test.flood."))
            let tap = try context.socket(.sub)
            try tap.set(.receiveHighWaterMark, 0)
            try tap.subscribe(Topic.tracePrefix)
            try tap.connect(broker.backendEndpoint)
            let publisher = try await connectPublisher(to: broker, context: context)
            try await Task.sleep(for: .milliseconds(500))  // the follower's and the tap's subscriptions
            for index in 0..<300 {
                let id = index < 200 ? TraceRequest.newTraceID() : TraceRequest.newTraceID().uppercased()
                try await publish(try Self.traced(index, traceID: id), on: publisher)
            }
            #expect(await eventually { await follower.activities().count == 300 }, "the flood's advertisements are believed as untraced ones")
            try await Task.sleep(for: .milliseconds(300))
            var fromBroker = 0, fromFollower = 0
            while let frames = try await receiveMessage(tap, timeout: .milliseconds(300)), frames.count >= 2 {
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
