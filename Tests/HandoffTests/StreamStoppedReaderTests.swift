import Foundation
import Handoff
import Testing
import HandoffTestSupport

/// A reader that stops before the end, between two real nodes: the other side's writer must not be
/// left waiting for credit (``StreamPair/readerStopped(after:now:)`` has the rules on the machine).
@Suite("Continuation streams: a reader that stops early", .exclusive)
struct StreamStoppedReaderTests {
    /// Continues a streaming activity of `a` on `b` and opens streams of `direction`.
    func opened(from a: Node, to b: Node, delegate: StreamPeer, direction: StreamDirection) async throws -> ContinuationStreams {
        let activity = try await currentStreamingActivity(on: a, delegate: delegate)
        await b.setContinuationHandler(forType: activity.activityType) { _ in }
        let continued = try #require(try await b.continueActivity(try await discovered(activity.id, on: b), wantingStreams: true).restored)
        return try await b.openStreams(for: continued, direction: direction)
    }

    /// Reads one chunk, then leaves the loop: the iterator is dropped before the end.
    func readOneChunkAndStop(_ input: ContinuationInputStream) async throws -> Int {
        for try await chunk in input { return chunk.count }
        return 0
    }

    @Test("a reader that leaves its loop after one chunk of a one-way stream: the writer's next write throws streamCancelled, saying how far the reader got")
    func leavesItsLoop() async throws {
        try await withTwoNodes(configureB: { $0.streamWindow = 2 }) { a, b in
            let peer = StreamPeer(sending: patternBytes(8_000_000, seed: 21))
            let streams = try await opened(from: a, to: b, delegate: peer, direction: .fromOriginator)
            let first = try await readOneChunkAndStop(streams.input)
            #expect(first > 0)
            #expect(await eventually { peer.writeError != nil }, "the writer must not wait for credit for ever")
            #expect(peer.writeError?.code == .streamCancelled)
            #expect(peer.writeError?.message.contains("the reader stopped after \(first) bytes") == true, "\(String(describing: peer.writeError))")
            #expect(try #require(peer.streams).output.progress.bytes < 8_000_000)
            let (atContinuer, atOrigin) = (await b.streamCounters, await a.streamCounters)
            #expect(atContinuer.readersStopped == 1 && atOrigin.readersStopped == 0, "counted where the reader stopped: \(atContinuer), \(atOrigin)")
        }
    }

    @Test("a reading task that is cancelled: its read throws streamCancelled, and the writer's too")
    func readingTaskCancelled() async throws {
        try await withTwoNodes(configureB: { $0.streamWindow = 2 }) { a, b in
            let peer = StreamPeer(sending: patternBytes(8_000_000, seed: 22), readDelay: .seconds(60))
            let streams = try await opened(from: a, to: b, delegate: peer, direction: .fromOriginator)
            let reading = Task {
                var count = 0
                for try await chunk in streams.input {
                    count += chunk.count
                    try? await Task.sleep(for: .seconds(60))
                }
                return count
            }
            #expect(await eventually { streams.input.progress.bytes > 0 })
            reading.cancel()
            do {
                _ = try await reading.value
                Issue.record("a cancelled reading task must not finish normally")
            } catch let error as HandoffError {
                #expect(error.code == .streamCancelled)
            }
            #expect(await eventually { peer.writeError != nil })
            #expect(peer.writeError?.code == .streamCancelled)
        }
    }

    @Test("a reader that stops on a pair that also writes: the pair is cancelled; the other side's writes and this side's throw streamCancelled")
    func alsoWrites() async throws {
        try await withTwoNodes(configureB: { $0.streamWindow = 2 }) { a, b in
            let peer = StreamPeer(sending: patternBytes(8_000_000, seed: 23))
            let streams = try await opened(from: a, to: b, delegate: peer, direction: .both)
            #expect(try await readOneChunkAndStop(streams.input) > 0)
            #expect(await eventually { peer.writeError != nil && peer.received != nil })
            #expect(peer.writeError?.code == .streamCancelled)
            if case .failure(let error)? = peer.received { #expect(error.code == .streamCancelled) } else { Issue.record("the originator's read must fail, not end") }
            do throws(HandoffError) {
                try await streams.output.write(patternBytes(1_000, seed: 24))
                try await streams.output.finish()
                Issue.record("a write to a pair cancelled by its own reader must throw")
            } catch {
                #expect(error.code == .streamCancelled)
                #expect(error.message.contains("its reader stopped"), "\(error.message)")
            }
        }
    }

    @Test("a reader that reads to the end, then drops its iterator, cancels nothing: the pair completes")
    func readsToTheEnd() async throws {
        try await withTwoNodes { a, b in
            let outgoing = patternBytes(600_000, seed: 25)
            let peer = StreamPeer(sending: outgoing)
            let streams = try await opened(from: a, to: b, delegate: peer, direction: .fromOriginator)
            var received = Data()
            for try await chunk in streams.input { received.append(chunk) }
            #expect(received == outgoing)
            try await Task.sleep(for: .milliseconds(300))
            #expect(peer.writeError == nil)
            #expect(await eventually {
                let (atOrigin, atContinuer) = (await a.openStreams, await b.openStreams)
                return atOrigin.isEmpty && atContinuer.isEmpty && peer.received != nil
            })
            #expect(peer.writeError == nil, "a reader that had the end stopped nothing")
        }
    }
}
