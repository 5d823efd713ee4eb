import Foundation
import HandoffWire
import Testing
import ZeroMQ
@testable import Handoff
import HandoffTestSupport

/// Which node a pair's events name (wire.proto, `NodeEvent.peer`): operators see who streams with
/// whom on the live page and in `handoff top`.
@Suite("Stream events name the other end", .exclusive)
struct StreamEventPeerTests {
    /// The stream events `monitor` received, by kind, with the peer each names.
    private func streamEvents(_ monitor: Socket) async throws -> [(kind: WireNodeEvent.Kind, peer: String)] {
        var events: [(kind: WireNodeEvent.Kind, peer: String)] = []
        while let frames = try await receiveMessage(monitor, timeout: .milliseconds(300)), frames.count >= 2 {
            if case .nodeEvent(let event)? = try WireEnvelope.decode(frames[1].bytes).body, event.kind != .continued {
                events.append((event.kind, event.peer.name))
            }
        }
        return events
    }

    @Test("both ends' opened and finished events name the other node: the originator the continuing node, the continuing node the originator")
    func eventsNameThePeer() async throws {
        try await withTwoNodes { a, b in
            let peer = StreamPeer(sending: patternBytes(64 * 1024, seed: 3))
            let activity = try await currentStreamingActivity(on: a, delegate: peer)
            let context = try Context()
            var monitors: [Socket] = []
            for node in [a, b] {
                let monitor = try context.socket(.sub)
                try monitor.subscribe("E:")
                try monitor.connect(try #require(node.busEndpoint))
                monitors.append(monitor)
            }
            try await Task.sleep(for: .milliseconds(300))  // the subscriptions reach the publishers
            await b.setContinuationHandler(forType: activity.activityType) { _ in }
            let continued = try #require(try await b.continueActivity(try await discovered(activity.id, on: b), wantingStreams: true).restored)
            let streams = try await b.openStreams(for: continued, direction: .fromOriginator)
            #expect(try await streams.input.readAll().count == peer.outgoing.count)
            try await Task.sleep(for: .milliseconds(300))
            let atOriginator = try await streamEvents(monitors[0]), atContinuer = try await streamEvents(monitors[1])
            for (events, other) in [(atOriginator, "node-b"), (atContinuer, "node-a")] {
                #expect(events.contains { $0.kind == .streamOpened }, "\(events)")
                #expect(events.contains { $0.kind == .streamFinished }, "\(events)")
                #expect(!events.isEmpty && events.allSatisfy { $0.peer == other }, "expected every event to name \(other): \(events)")
            }
        }
    }
}
