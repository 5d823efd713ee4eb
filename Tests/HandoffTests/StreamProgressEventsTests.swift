import Foundation
import HandoffWire
import Testing
import ZeroMQ
@testable import Handoff
import HandoffTestSupport

/// How often a node publishes a stream pair's progress (wire.proto, `NodeEvent`): at most four
/// times a second per pair, however often its clock wakes.
@Suite("Stream progress events, four a second per pair", .exclusive)
struct StreamProgressEventsTests {
    @Test("a pair read slowly for about a second, on a node whose clock wakes every 25 ms (a short continue timeout): its progress is published at most four times a second (every wake, before)")
    func progressAtMostFourASecond() async throws {
        try await withTwoNodes(configureA: {
            $0.continueTimeout = .milliseconds(100)
            $0.streamChunkSize = 16 * 1024
            $0.streamWindow = 2
        }, configureB: {
            $0.streamChunkSize = 16 * 1024
            $0.streamWindow = 2
        }) { a, b in
            let peer = StreamPeer(sending: patternBytes(400 * 1024, seed: 9))
            let activity = try await currentStreamingActivity(on: a, delegate: peer)
            let context = try Context()
            let monitor = try await subscribedTap(context, at: try #require(a.busEndpoint), following: ["E:"], presenceOf: a.id)
            await b.setContinuationHandler(forType: activity.activityType) { _ in }
            let continued = try #require(try await b.continueActivity(try await discovered(activity.id, on: b), wantingStreams: true).restored)
            let streams = try await b.openStreams(for: continued, direction: .fromOriginator)
            let started = ContinuousClock.now
            var read = 0
            for try await chunk in streams.input {
                read += chunk.count
                try await Task.sleep(for: .milliseconds(40))
            }
            let seconds = (ContinuousClock.now - started).seconds
            #expect(read == peer.outgoing.count)
            try await Task.sleep(for: .milliseconds(300))
            var progress = 0
            while let frames = try await receiveMessage(monitor, timeout: .milliseconds(200)), frames.count >= 2 {
                if case .nodeEvent(let event)? = try WireEnvelope.decode(frames[1].bytes).body, event.kind == .streamProgress { progress += 1 }
            }
            #expect(progress >= 2, "no progress published while \(read) bytes moved in \(seconds) s")
            #expect(progress <= Int(seconds * 4) + 3, "\(progress) progress events in \(seconds) s")
        }
    }
}
