import Foundation
import HandoffWire
import Testing

@testable import Handoff

/// The queue between a node and a stream's reader, without a node: the contract of the
/// `AsyncStream` it replaced (in order, the end after what is queued, nothing after the end, a
/// cancelled reader's read ends at once).
@Suite("Stream inbox: a stream's queue to its reader, with the AsyncStream contract it replaced")
struct StreamInboxTests {
    static func chunk(_ byte: UInt8) -> StreamEvent { .data(Data([byte])) }

    /// The byte of a one-byte chunk; nil for anything else.
    static func byte(_ event: StreamEvent?) -> UInt8? {
        if case .data(let data)? = event, data.count == 1 { data.first } else { nil }
    }

    @Test("events queued before the read come out in order; after finish, what is queued, then nil for good")
    func queuedThenFinished() async {
        let inbox = StreamInbox()
        for byte in UInt8(1)...3 { inbox.yield(Self.chunk(byte)) }
        inbox.finish()
        inbox.yield(Self.chunk(4))  // after the end: dropped
        var bytes: [UInt8] = []
        while let event = await inbox.next() { bytes.append(Self.byte(event) ?? 0) }
        #expect(bytes == [1, 2, 3])
        #expect(await inbox.next() == nil)
    }

    @Test("a reader waiting on an empty inbox gets the next event yielded, and then the end")
    func waitingReader() async throws {
        let inbox = StreamInbox()
        let reader = Task { () -> [UInt8] in
            var bytes: [UInt8] = []
            while let event = await inbox.next() { bytes.append(Self.byte(event) ?? 0) }
            return bytes
        }
        // Each yield after the reader had time to wait: handed over, not queued.
        for byte in UInt8(1)...5 {
            try await Task.sleep(for: .milliseconds(5))
            inbox.yield(Self.chunk(byte))
        }
        try await Task.sleep(for: .milliseconds(5))
        inbox.finish()
        #expect(await reader.value == [1, 2, 3, 4, 5])
    }

    @Test("the end and a failure are events like chunks: queued in order behind them")
    func endAndFailureInOrder() async {
        let inbox = StreamInbox()
        inbox.yield(Self.chunk(1))
        inbox.yield(.end(total: 1, checksum: nil))
        inbox.finish()
        guard case .data? = await inbox.next(), case .end(let total, _)? = await inbox.next() else {
            Issue.record("the chunk, then the end")
            return
        }
        #expect(total == 1)
        #expect(await inbox.next() == nil)
    }

    @Test("a reader cancelled while it waits gets nil at once; later events are dropped, and reads end at once")
    func cancelledWhileWaiting() async throws {
        let inbox = StreamInbox()
        let reader = Task { await inbox.next() }
        try await Task.sleep(for: .milliseconds(20))
        reader.cancel()
        #expect(await reader.value == nil)
        inbox.yield(Self.chunk(1))
        #expect(await inbox.next() == nil)
    }

    @Test("a reader already cancelled gets nil, events queued or not")
    func cancelledBeforeReading() async {
        let inbox = StreamInbox()
        let reader = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await inbox.next()
        }
        #expect(await reader.value == nil)
    }

    @Test("the reading task cancelled: its iteration of the input throws streamCancelled, not a truncation")
    func cancelledIteration() async throws {
        let node = try Node(configuration: testConfiguration("inbox"))
        let inbox = StreamInbox()
        let key = StreamKey(local: 1)
        let input = ContinuationInputStream(
            side: StreamReadingSide(node: node, key: key, events: inbox, window: 16, enabled: true),
            hold: ApplicationHold(node: node, key: key, generation: 1))
        let reader = Task { () throws(HandoffError) -> Int in
            var count = 0
            for try await chunk in input { count += chunk.count }
            return count
        }
        inbox.yield(Self.chunk(1))
        try await Task.sleep(for: .milliseconds(20))
        reader.cancel()
        let outcome = await reader.result
        guard case .failure(let error) = outcome else {
            Issue.record("the iteration ended without an error: \(outcome)")
            return
        }
        #expect((error as? HandoffError)?.code == .streamCancelled, "\(error)")
    }

    @Test("a reader still waiting when its node lets the pair go unfinished ends: its iteration throws a truncation")
    func sessionReleased() async throws {
        let node = try Node(configuration: testConfiguration("inbox"))
        let pair = StreamPair(isContinuer: true, direction: .unspecified, peerName: "the originator", activityType: "org.handoff.test.bulk",
                              window: 4, chunkSize: 100, peerChunkSize: 100, now: .now)
        var session: StreamSession? = StreamSession(
            node: node, key: StreamKey(local: 1), route: StreamRoute(peer: .dealer("tcp://127.0.0.1:1"), id: 1), activityID: "A",
            owner: "peer", pair: pair, checksum: .crc32c)
        let input = try #require(session?.streams.input)
        let reader = Task { () throws(HandoffError) -> Int in
            var count = 0
            for try await chunk in input { count += chunk.count }
            return count
        }
        try await Task.sleep(for: .milliseconds(20))
        session = nil
        guard case .failure(let error) = await reader.result else {
            Issue.record("the iteration ended without an error")
            return
        }
        #expect((error as? HandoffError)?.code == .streamTruncated, "\(error)")
        #expect(session == nil)
    }
}
