import Foundation
@testable import Handoff
import HandoffWire
import Testing
import ZeroMQ
import HandoffTestSupport

/// An application that lets go of a pair, between two real nodes: what it left unfinished is ended,
/// so that neither node keeps the pair, nor the peer's writer or reader waits, for ever
/// (``StreamPair/applicationLetGo(readerTook:written:emptyEnd:now:)`` has the rules on the machine).
@Suite("Continuation streams: an application that lets go of a pair", .exclusive)
struct StreamLetGoTests {
    func continued(_ activity: UserActivity, on b: Node) async throws -> ContinuedActivity {
        try #require(try await b.continueActivity(try await discovered(activity.id, on: b), wantingStreams: true).restored)
    }

    @Test("a continuing node that reads a pair opened both ways and lets it go without writing: its direction ends empty, the pair completes on both nodes, and pairs past the limit per peer still open")
    func readAndLetGo() async throws {
        try await withTwoNodes { a, b in
            let outgoing = patternBytes(10_000, seed: 31)
            let peer = StreamPeer(sending: outgoing)
            let activity = try await currentStreamingActivity(on: a, delegate: peer)
            await b.setContinuationHandler(forType: activity.activityType) { _ in }
            // Six in turn: before, the fifth was refused (the originator at 4 pairs with this peer).
            for round in 0..<6 {
                let received = try await b.openStreams(for: try await continued(activity, on: b)).input.readAll()
                #expect(received == outgoing, "round \(round)")
                #expect(await eventually {
                    let (atOrigin, atContinuer) = (await a.openStreams, await b.openStreams)
                    return atOrigin.isEmpty && atContinuer.isEmpty
                }, "round \(round): the pair must complete on both nodes")
            }
            #expect(try peer.received?.get() == Data(), "the originator's reader gets an empty stream, whole")
            let (atOrigin, atContinuer) = (await a.streamCounters, await b.streamCounters)
            #expect(atOrigin.letGo + atOrigin.readersStopped + atContinuer.letGo + atContinuer.readersStopped == 0, "\(atOrigin) \(atContinuer)")
            #expect(peer.writeError == nil)
        }
    }

    @Test("an application that lets go of an output it wrote to without finishing: the pair is cancelled, and the reader gets streamCancelled, never a short stream as whole")
    func unfinishedOutput() async throws {
        try await withTwoNodes { a, b in
            let peer = StreamPeer(sending: Data())
            let activity = try await currentStreamingActivity(on: a, delegate: peer)
            await b.setContinuationHandler(forType: activity.activityType) { _ in }
            func writeSomeAndLetGo() async throws {
                let streams = try await b.openStreams(for: try await continued(activity, on: b), direction: .toOriginator)
                try await streams.output.write(patternBytes(5_000, seed: 32))
            }
            try await writeSomeAndLetGo()
            #expect(await eventually { peer.received != nil })
            guard case .failure(let error)? = peer.received else {
                Issue.record("the originator's reader must fail, not take 5,000 bytes as the stream: \(String(describing: peer.received))")
                return
            }
            #expect(error.code == .streamCancelled)
            #expect(error.message.contains("let go of the stream after writing 5000 bytes"), "\(error.message)")
            #expect(await b.streamCounters.letGo == 1)
        }
    }

    @Test("a handle kept alone keeps the pair: the pair dropped but its input, read later, whole; while held, the node hands out the same handles")
    func handleKeptAlone() async throws {
        // More than the window (2 chunks), so that the pair cannot complete before it is read.
        try await withTwoNodes(configureB: { $0.streamWindow = 2 }) { a, b in
            let outgoing = patternBytes(3_000_000, seed: 33)
            let peer = StreamPeer(sending: outgoing)
            let activity = try await currentStreamingActivity(on: a, delegate: peer)
            await b.setContinuationHandler(forType: activity.activityType) { _ in }
            let input = try await b.openStreams(for: try await continued(activity, on: b), direction: .fromOriginator).input
            try await Task.sleep(for: .milliseconds(300))
            let handedOut = try #require(await b.openStreams.first)
            #expect(handedOut.input === input)
            #expect(try await input.readAll() == outgoing)
            #expect(peer.writeError == nil)
        }
    }

    /// An originator's delegate that writes its stream, finishes it and returns, reading nothing.
    final class WritesAndReturns: UserActivityDelegate, Sendable {
        let outgoing: Data
        init(_ outgoing: Data) { self.outgoing = outgoing }
        func userActivity(_ activity: UserActivity, didReceive streams: ContinuationStreams) async {
            try? await streams.output.write(outgoing)
            try? await streams.output.finish()
        }
    }

    @Test("the plainest use, both ways: the originator writes and returns, the continuing node reads and lets go; the pair finishes on both nodes, failed on neither")
    func plainestUse() async throws {
        try await withTwoNodes { a, b in
            let outgoing = patternBytes(200_000, seed: 34)
            let activity = try UserActivity(activityType: "org.handoff.contacts.list-contacts")
            activity.supportsContinuationStreams = true
            let delegate = WritesAndReturns(outgoing)
            activity.delegate = delegate
            try await activity.becomeCurrent(on: a)
            let context = try Context()
            var monitors: [Socket] = []
            for node in [a, b] {
                monitors.append(try await subscribedTap(context, at: try #require(node.busEndpoint), following: ["E:"], presenceOf: node.id))
            }
            await b.setContinuationHandler(forType: activity.activityType) { _ in }
            #expect(try await b.openStreams(for: try await continued(activity, on: b)).input.readAll() == outgoing)
            for (monitor, node) in zip(monitors, ["originator", "continuing node"]) {
                let kinds = try await StreamEventPeerTests.streamEvents(monitor).map(\.kind)
                #expect(kinds.contains(.streamFinished) && !kinds.contains(.streamFailed), "the \(node): \(kinds)")
            }
        }
    }

    @Test("only the application's letting go counts: handles made before the pair was handed out (the node's open pairs read while its open waited) end nothing; once handed out, the last handle's going does, unless a newer hold has the pair")
    func letGoCountsOnceHandedOut() throws {
        let node = try Node(configuration: testConfiguration("hold"))
        let pair = StreamPair(isContinuer: true, direction: .unspecified, peerName: "the originator", activityType: "org.handoff.test.bulk",
                              window: 4, chunkSize: 100, peerChunkSize: 100, now: .now)
        let session = StreamSession(
            node: node, key: StreamKey(local: 1), route: StreamRoute(peer: .dealer("tcp://127.0.0.1:1"), id: 1), activityID: "A",
            owner: "peer", pair: pair, checksum: .crc32c)
        do { _ = session.streams }  // an observer's, while the open waits: gone at once
        #expect(session.holdGeneration == 1 && session.heldAfterLetGo(of: 1), "not the application's to let go")
        var handed: ContinuationStreams? = session.handOut()
        #expect(session.holdGeneration == 2)
        #expect(session.streams.input === handed?.input, "while held, the same handles")
        #expect(session.heldAfterLetGo(of: 2))
        handed = nil
        #expect(!session.heldAfterLetGo(of: 2), "the application let go")
        withExtendedLifetime(session.streams) {
            #expect(session.holdGeneration == 3)
            #expect(session.heldAfterLetGo(of: 2), "a late word of the old hold: a newer one has the pair")
            #expect(session.heldAfterLetGo(of: 3), "the newer hold is still held")
        }
    }
}
