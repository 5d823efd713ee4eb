import Foundation
import Handoff
import HandoffWire
import Testing

/// What `Proto/` promises a third-party peer, checked against a real node by a peer written from the
/// contract alone (``WirePeer``): the origin's checks of a request, and what may flow on a pair.
@Suite("The wire contract, as a third-party peer sees it")
struct WireContractTests {
    @Test("a continue request with the right activity id and another type is refused with INVALID_ACTIVITY_TYPE, not answered")
    func continueRequestTypeChecked() async throws {
        try await Node.withRunning(testConfiguration("typed")) { node in
            let activity = try UserActivity(activityType: "org.handoff.contacts.edit-contact")
            activity.userInfo = ["draft": "Ada"]
            try await activity.becomeCurrent(on: node)
            let peer = try WirePeer(connectingTo: node.continuationEndpoint)
            var request = WireContinueRequest()
            request.activityID = activity.id
            for (index, type) in ["org.handoff.contacts.list-contacts", "", "org.handoff.contacts"].enumerated() {
                request.activityType = type
                try peer.send(.continueRequest(request), correlationID: UInt64(index + 1))
                let reply = try #require(try await peer.receive(within: .seconds(5)))
                guard case .continueReply(let answer) = reply.envelope.body, case .error(let error) = answer.result else {
                    Issue.record("a request for type \"\(type)\" got \(reply.envelope.body as Any)")
                    continue
                }
                #expect(error.code == .invalidActivityType, "type \"\(type)\"")
            }
            // The right type is answered with the activity, and the wrong ones did not use it up.
            request.activityType = activity.activityType
            try peer.send(.continueRequest(request), correlationID: 9)
            let reply = try #require(try await peer.receive(within: .seconds(5)))
            guard case .continueReply(let answer) = reply.envelope.body, case .activity(let answered) = answer.result else {
                Issue.record("the right type got \(reply.envelope.body as Any)")
                return
            }
            #expect(answered.activityID == activity.id)
        }
    }

    @Test("a one-way pair: once the origin has sent its end, nothing more comes from it, keep-alives included, until the end is acknowledged")
    func oneWayPairKeepsExcludedDirectionSilent() async throws {
        try await Node.withRunning(testConfiguration("one-way")) { node in
            let delegate = StreamPeer(sending: patternBytes(10_000, seed: 7))
            let activity = try await currentStreamingActivity(on: node, delegate: delegate)

            let peer = try WirePeer(connectingTo: node.continuationEndpoint)
            try peer.openStream(1, activityID: activity.id, window: 64, chunkSize: 4096, direction: .originToContinuer)
            // The answer, the data and the end, in that order.
            var received: UInt64 = 0
            var ended = false
            let deadline = ContinuousClock.now + .seconds(20)
            while !ended, ContinuousClock.now < deadline {
                guard let (envelope, _) = try await peer.receive(within: .seconds(1)),
                      case .streamFrame(let frame) = envelope.body else { continue }
                switch frame.kind {
                case .data(let data): received = max(received, data.offset + UInt64(data.length))
                case .end(let end): ended = true; #expect(end.totalLength == 10_000)
                case .error(let error): Issue.record("the pair failed: \(error.message)"); return
                default: break
                }
            }
            #expect(ended && received == 10_000, "received \(received) bytes, ended: \(ended)")
            // The bytes are acknowledged, the end not yet (a continuer that is slow to say so): the
            // origin keeps the pair for that acknowledgement, and must say nothing on it meanwhile.
            var credit = WireStreamCredit()
            credit.acknowledgedOffset = received
            try peer.send(stream: 1, .credit(credit))
            var heard: [String] = []
            let quiet = ContinuousClock.now + .milliseconds(2_600)
            while ContinuousClock.now < quiet {
                guard let (envelope, _) = try await peer.receive(within: .milliseconds(200)) else { continue }
                if case .streamFrame(let frame) = envelope.body { heard.append("\(frame.kind.map { "\($0)".prefix(60) } ?? "nil")") }
            }
            #expect(heard.isEmpty, "the origin sent \(heard.count) frames after its end: \(heard)")
            // Acknowledging the end finishes the pair on the origin.
            credit.endReceived = true
            try peer.send(stream: 1, .credit(credit))
            let finished = ContinuousClock.now + .seconds(10)
            while await !node.openStreams.isEmpty, ContinuousClock.now < finished { try await Task.sleep(for: .milliseconds(20)) }
            #expect(await node.openStreams.isEmpty)
        }
    }
}
