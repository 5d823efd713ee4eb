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
    /// The stream events `monitor` receives, by kind, with the peer each names: until both the
    /// opened and the finished event have come (at most 10 s), then until 300 ms pass without another.
    static func streamEvents(_ monitor: Socket) async throws -> [(kind: WireNodeEvent.Kind, peer: String)] {
        var events: [(kind: WireNodeEvent.Kind, peer: String)] = []
        try await receiveMessages(monitor, within: .seconds(10), quiet: .milliseconds(300), until: {
            events.contains { $0.kind == .streamOpened } && events.contains { $0.kind == .streamFinished }
        }) { frames in
            guard frames.count >= 2 else { return }
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
                monitors.append(try await subscribedTap(context, at: try #require(node.busEndpoint), following: ["E:"], presenceOf: node.id))
            }
            await b.setContinuationHandler(forType: activity.activityType) { _ in }
            let continued = try #require(try await b.continueActivity(try await discovered(activity.id, on: b), wantingStreams: true).restored)
            let streams = try await b.openStreams(for: continued, direction: .fromOriginator)
            #expect(try await streams.input.readAll().count == peer.outgoing.count)
            let atOriginator = try await Self.streamEvents(monitors[0]), atContinuer = try await Self.streamEvents(monitors[1])
            for (events, other) in [(atOriginator, "node-b"), (atContinuer, "node-a")] {
                #expect(events.contains { $0.kind == .streamOpened }, "\(events)")
                #expect(events.contains { $0.kind == .streamFinished }, "\(events)")
                #expect(!events.isEmpty && events.allSatisfy { $0.peer == other }, "expected every event to name \(other): \(events)")
            }
        }
    }
}
