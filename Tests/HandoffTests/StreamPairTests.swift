import DequeModule
import Foundation
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ

@testable import Handoff
import HandoffTestSupport

/// stream.proto's rules for one pair, each on the machine alone (``StreamPair``): events in,
/// actions out, time passed in. No node, no socket, no clock.
@Suite("A stream pair's protocol, without sockets")
struct StreamPairTests {
    let start = ContinuousClock.now
    let limits = StreamLiveness.Limits(idleTimeout: .seconds(5), resumeWindow: .seconds(30))
    /// An end's checksum where its value does not matter.
    static let emptyCRC = StreamEndChecksum(algorithm: .crc32c, value: Data(count: 4))

    func pair(continuer: Bool = true, direction: WireStreamDirection = .unspecified, window: Int = 4, chunkSize: Int = 100) -> StreamPair {
        StreamPair(isContinuer: continuer, direction: direction, peerName: continuer ? "the originator" : "the continuing node",
                   activityType: "org.handoff.test.bulk", window: window, chunkSize: chunkSize, peerChunkSize: chunkSize, now: start)
    }

    func chunk(at offset: UInt64, _ count: Int = 100) -> StreamPair.SentChunk {
        StreamPair.SentChunk(offset: offset, frame: Frame([UInt8](repeating: 7, count: count)), total: 0)
    }

    func data(at offset: UInt64) -> WireStreamData {
        var data = WireStreamData()
        data.offset = offset
        return data
    }

    /// The frames among `actions`, in order.
    func sent(_ actions: [StreamPair.Action]) -> [WireStreamFrame.OneOf_Kind] {
        actions.compactMap { if case .send(let kind, _) = $0 { kind } else { nil } }
    }

    func failure(_ actions: [StreamPair.Action]) -> HandoffError? {
        actions.lazy.compactMap { if case .failed(let error) = $0 { error } else { nil } }.first
    }

    func completes(_ actions: [StreamPair.Action]) -> Bool {
        actions.contains { if case .completed = $0 { true } else { false } }
    }

    @Test("reading: a chunk in order is delivered whole; one sent again after a resume is dropped, an overlap delivered only in part")
    func arrivals() throws {
        var reader = pair()
        let first = reader.dataArrived(data(at: 0), chunk: Data(repeating: 1, count: 100), now: start)
        guard case .deliver(let bytes) = try #require(first.last) else { Issue.record("expected a delivery, got \(first)"); return }
        #expect(bytes.count == 100 && reader.receivedOffset == 100 && reader.creditOutstanding == 3 && reader.unconsumed == 1)
        let again = reader.dataArrived(data(at: 0), chunk: Data(repeating: 1, count: 100), now: start)
        #expect(again.count == 1 && reader.receivedOffset == 100)
        guard case .record(.duplicateBytesDropped(100)) = try #require(again.first) else { Issue.record("a duplicate must be counted, not delivered: \(again)"); return }
        let overlap = reader.dataArrived(data(at: 50), chunk: Data(repeating: 2, count: 100), now: start)
        guard case .deliver(let tail) = try #require(overlap.last) else { Issue.record("expected a delivery, got \(overlap)"); return }
        #expect(tail.count == 50 && reader.receivedOffset == 150)
    }

    @Test("reading: a gap while this side waits for its resume's answer (the broken connection lost a chunk, the peer wrote on) is dropped, not a violation; the chunks come again after the answer; then a gap is a violation again")
    func gapWhileResuming() throws {
        var reader = pair()
        _ = reader.dataArrived(data(at: 0), chunk: Data(count: 100), now: start)
        let (dropActions, interrupted) = reader.connectionDropped(failingOpenWith: HandoffError(.connectionUnavailable, "dropped"), now: start)
        #expect(interrupted && dropActions.isEmpty)
        // The chunk at 100 was lost with the connection; the one at 200 comes before the answer.
        let ahead = reader.dataArrived(data(at: 200), chunk: Data(count: 100), now: start)
        guard ahead.count == 1, case .record(.droppedAheadOfResume(100)) = try #require(ahead.first) else {
            Issue.record("the chunk beyond the gap must be dropped and recorded, nothing else: \(ahead)")
            return
        }
        #expect(reader.isLive && reader.receivedOffset == 100)
        var answer = WireStreamResume()
        answer.receivedOffset = 0
        answer.window = 4
        _ = reader.received(.resume(answer), now: start)
        let resent = reader.dataArrived(data(at: 100), chunk: Data(count: 100), now: start)
        guard case .deliver = try #require(resent.last) else { Issue.record("the chunk sent again must be delivered: \(resent)"); return }
        #expect(reader.receivedOffset == 200)
        #expect(failure(reader.dataArrived(data(at: 300), chunk: Data(count: 100), now: start))?.code == .streamProtocolViolation)
    }

    @Test("reading: a gap, an oversized chunk, a chunk past the window or on an excluded direction is a violation: the peer is told, the pair fails")
    func violations() throws {
        var gap = pair(window: 2)
        let gapActions = gap.dataArrived(data(at: 200), chunk: Data(count: 100), now: start)
        #expect(failure(gapActions)?.code == .streamProtocolViolation)
        #expect(failure(gapActions)?.message.contains("gap") == true)
        guard case .error = try #require(sent(gapActions).first) else { Issue.record("the peer must be told: \(gapActions)"); return }
        #expect(!gap.isLive && gap.failedAt == start)

        var oversized = pair()
        #expect(failure(oversized.dataArrived(data(at: 0), chunk: Data(count: 101), now: start))?.message.contains("larger") == true)

        var flooded = pair(window: 1)
        _ = flooded.dataArrived(data(at: 0), chunk: Data(count: 100), now: start)
        #expect(failure(flooded.dataArrived(data(at: 100), chunk: Data(count: 100), now: start))?.message.contains("window") == true)

        // Opened "from the originator only": the originator writes and never reads.
        var oneWay = pair(continuer: false, direction: .originToContinuer)
        #expect(oneWay.writes && !oneWay.reads && oneWay.endReceived && !oneWay.endAcknowledged)
        #expect(failure(oneWay.dataArrived(data(at: 0), chunk: Data(count: 10), now: start))?.message.contains("excluded") == true)
        let reader = pair(continuer: true, direction: .originToContinuer)
        #expect(!reader.writes && reader.reads && reader.endAcknowledged && !reader.endReceived)
    }

    @Test("writing: at most the credit granted and never more than 64 chunks unacknowledged; credit wakes the writer")
    func credit() {
        var writer = pair(continuer: false)
        #expect(!writer.writerMayProceed)  // no credit before the open
        _ = writer.creditArrived(WireStreamCredit.with { $0.chunks = 100 }, now: start)
        var offset: UInt64 = 0
        while writer.writerMayProceed {
            #expect(sent(writer.write(chunk(at: offset), now: start)).count == 1)
            offset += 100
        }
        #expect(writer.retained.count == StreamPair.maxUnacknowledgedChunks && writer.sendCredit == 36)
        #expect(writer.write(chunk(at: offset), now: start).isEmpty)  // past the bound: not sent
        let acknowledged = writer.creditArrived(WireStreamCredit.with { $0.acknowledgedOffset = 1_000 }, now: start + .seconds(1))
        #expect(acknowledged.contains { if case .wakeWriter = $0 { true } else { false } })
        #expect(writer.retained.count == 54 && writer.lastProgress == start + .seconds(1))
    }

    @Test("an acknowledgement forgets what the peer has; the acknowledged end forgets everything and completes the writer")
    func acknowledgements() {
        var writer = pair(continuer: false, direction: .originToContinuer)
        writer.retained = [chunk(at: 0), chunk(at: 100), chunk(at: 200)]
        writer.acknowledge(upTo: 150, endReceived: false, now: start)
        #expect(writer.retained.map(\.offset) == [100, 200])  // the chunk at 100 is only half acknowledged
        writer.acknowledge(upTo: 300, endReceived: true, now: start)  // no end was written yet: nothing more
        #expect(writer.retained.isEmpty && !writer.endAcknowledged)
        writer.sendCredit = 1
        let ending = writer.writeEnd(total: 300, checksum: StreamEndChecksum(algorithm: .crc32c, value: Data([0xDE, 0xAD, 0xBE, 0xEF])), now: start)
        guard case .end(let end) = sent(ending).first else { Issue.record("the end must be sent: \(ending)"); return }
        #expect(end.checksumAlgorithm == .crc32C && end.checksum == Data([0xDE, 0xAD, 0xBE, 0xEF]) && end.totalLength == 300)
        let done = writer.creditArrived(WireStreamCredit.with { $0.acknowledgedOffset = 0; $0.endReceived = true }, now: start)
        #expect(writer.endAcknowledged && completes(done))
        #expect(!completes(writer.creditArrived(WireStreamCredit.with { $0.endReceived = true }, now: start)))  // once
    }

    @Test("the end is delivered to the reader once and acknowledged every time it arrives (again after a resume)")
    func endOnce() {
        var reader = pair(continuer: true, direction: .originToContinuer)
        var end = WireStreamEnd()
        end.totalLength = 0
        end.checksumAlgorithm = .crc32C
        end.checksum = Data([0, 0, 0, 1])
        let first = reader.endArrived(end, now: start)
        #expect(first.contains { if case .deliverEnd(0, let checksum) = $0 { checksum == StreamEndChecksum(algorithm: .crc32c, value: Data([0, 0, 0, 1])) } else { false } })
        #expect(completes(first))
        let again = reader.endArrived(end, now: start)
        #expect(!again.contains { if case .deliverEnd = $0 { true } else { false } })
        guard case .credit(let ack) = sent(again).first else { Issue.record("acknowledged again: \(again)"); return }
        #expect(ack.endReceived)
    }

    @Test("reading: an end that counts more than arrived, while this side waits for its resume's answer, is dropped like a chunk beyond the gap and comes again after the bytes; otherwise it goes to the reader, which judges it")
    func endBeyondAGap() throws {
        var reader = pair(continuer: true, direction: .originToContinuer)
        _ = reader.dataArrived(data(at: 0), chunk: Data(count: 100), now: start)
        _ = reader.connectionDropped(failingOpenWith: HandoffError(.connectionUnavailable, "dropped"), now: start)
        // The chunk at 100 was lost with the connection; the last one and the end come before the answer.
        _ = reader.dataArrived(data(at: 200), chunk: Data(count: 50), now: start)
        var end = WireStreamEnd()
        end.totalLength = 250
        let ahead = reader.endArrived(end, now: start)
        guard ahead.count == 1, case .record(.endDroppedAheadOfResume(total: 250)) = try #require(ahead.first) else {
            Issue.record("the end beyond the gap must be dropped and recorded, nothing else: \(ahead)")
            return
        }
        #expect(reader.isLive && !reader.endReceived && reader.receivedOffset == 100)
        var answer = WireStreamResume()
        answer.window = 4
        _ = reader.received(.resume(answer), now: start)
        _ = reader.dataArrived(data(at: 100), chunk: Data(count: 100), now: start)
        _ = reader.dataArrived(data(at: 200), chunk: Data(count: 50), now: start)
        let whole = reader.endArrived(end, now: start)
        #expect(whole.contains { if case .deliverEnd(250, nil) = $0 { true } else { false } } && reader.endReceived, "\(whole)")
        // Not waiting for a resume, an end that does not count what arrived goes to the reader,
        // which holds it to what arrived (streamTruncated: StreamIntegrityTests).
        var short = pair(continuer: true, direction: .originToContinuer)
        _ = short.dataArrived(data(at: 0), chunk: Data(count: 100), now: start)
        var lie = WireStreamEnd()
        lie.totalLength = 150
        #expect(short.endArrived(lie, now: start).contains { if case .deliverEnd(150, nil) = $0 { true } else { false } })
    }

    @Test("a resume sends again exactly what the peer lacks, the end too, under the credit it grants, before anything new")
    func rewind() {
        var writer = pair()
        writer.retained = [chunk(at: 0), chunk(at: 100), chunk(at: 200)]
        writer.end = WireStreamEnd()
        writer.rewind(to: 100, credit: 3, endReceived: false, now: start)
        #expect(writer.resend.map(\.offset) == [100, 200] && writer.retained.isEmpty && writer.sendCredit == 3 && writer.endNeedsSending)
        #expect(!writer.writerMayProceed)  // resends go first
        let pumped = writer.pump(now: start)
        #expect(sent(pumped).count == 3)  // two chunks, then the end
        #expect(writer.bytesResent == 200)

        var done = pair()
        done.retained = [chunk(at: 0)]
        done.end = WireStreamEnd()
        done.rewind(to: 100, credit: 4, endReceived: true, now: start)
        #expect(done.resend.isEmpty && done.endAcknowledged && !done.endNeedsSending)
    }

    @Test("the credit granted on a resume is the window less what the reader still holds")
    func resumeGrant() {
        var reader = pair(window: 8)
        reader.unconsumed = 3
        #expect(reader.resumeGrant() == 5)
        reader.unconsumed = 12
        #expect(reader.resumeGrant() == 0)
    }

    @Test("a pair waits on its peer when it has no credit or its reader took all that arrived; not while its own reader holds chunks")
    func waitsOnPeer() {
        var writer = pair(continuer: false, direction: .originToContinuer)
        #expect(writer.waitsOnPeer(writerWaiting: false))  // no credit granted yet
        writer.sendCredit = 4
        #expect(!writer.waitsOnPeer(writerWaiting: false))

        var reader = pair(continuer: true, direction: .originToContinuer)
        #expect(reader.waitsOnPeer(writerWaiting: false))  // nothing arrived
        _ = reader.dataArrived(data(at: 0), chunk: Data(repeating: 1, count: 100), now: start)
        #expect(reader.unconsumed == 1 && !reader.waitsOnPeer(writerWaiting: false))  // its own reader is behind, not the peer
        reader.readerTook(100, now: start)
        #expect(reader.waitsOnPeer(writerWaiting: false))  // it took everything: credit granted or not, the turn is the peer's
        reader.readerTook(50, now: start)
        reader.interruptedSince = start
        #expect(reader.waitsOnPeer(writerWaiting: false))
    }

    @Test("a failure is final: the first error stays, everything kept is dropped, a waiting writer wakes to it")
    func failureIsFinal() {
        var writer = pair()
        writer.retained = [chunk(at: 0)]
        writer.resend = [chunk(at: 100)]
        #expect(failure(writer.fail(HandoffError(.peerLost, "first"), now: start))?.code == .peerLost)
        #expect(writer.fail(HandoffError(.streamCancelled, "second"), now: start).isEmpty)
        #expect(writer.failure?.code == .peerLost && writer.retained.isEmpty && writer.resend.isEmpty)
        #expect(writer.writerMayProceed && !writer.isComplete)
        #expect(writer.received(.credit(WireStreamCredit.with { $0.chunks = 4 }), now: start).isEmpty)  // frames after it change nothing
    }

    @Test("the open: its answer sets the credit, chunk size and token; an answer for another direction is a violation; unanswered at its due time it fails, not before, and an answered one never")
    func open() {
        var opener = pair(chunkSize: 1_000)
        _ = opener.open(WireStreamOpen(), now: start, answerWithin: .seconds(2))
        #expect(opener.isOpening && !opener.awaitsResume)
        opener.transportRefused(now: start)  // a refused open is not an interruption to resume
        #expect(opener.interruptedSince == nil)
        var answer = WireStreamOpen()
        answer.window = 6
        answer.chunkSize = 500
        answer.resumeToken = Data([9])
        let opened = opener.received(.open(answer), now: start)
        #expect(opened.contains { if case .opened = $0 { true } else { false } })
        #expect(!opener.isOpening && opener.sendCredit == 6 && opener.writeChunkSize == 500 && opener.resumeToken == Data([9]))
        #expect(opener.expireOpen(now: start + .seconds(3), unanswered: HandoffError(.remoteApplicationTimedOut, "no answer")).isEmpty)

        var mismatched = pair(direction: .originToContinuer)
        _ = mismatched.open(WireStreamOpen(), now: start, answerWithin: .seconds(2))
        #expect(failure(mismatched.received(.open(answer), now: start))?.code == .streamProtocolViolation)

        var unanswered = pair()
        _ = unanswered.open(WireStreamOpen(), now: start, answerWithin: .seconds(2))
        #expect(failure(unanswered.tick(now: start + .seconds(60), limits: limits)) == nil)  // the open's own due time decides
        let noAnswer = HandoffError(.remoteApplicationTimedOut, "no answer")
        #expect(unanswered.expireOpen(now: start + .milliseconds(1_999), unanswered: noAnswer).isEmpty)
        #expect(unanswered.isOpening)
        #expect(failure(unanswered.expireOpen(now: start + .seconds(2), unanswered: noAnswer))?.code == .remoteApplicationTimedOut)
        #expect(unanswered.expireOpen(now: start + .seconds(3), unanswered: noAnswer).isEmpty)  // once
    }

    @Test("a pair that delivered everything both ways and misses only the last acknowledgement completes at the window instead of failing")
    func lastAcknowledgementLost() {
        var writer = pair(continuer: false, direction: .originToContinuer)
        writer.sendCredit = 1
        _ = writer.writeEnd(total: 0, checksum: Self.emptyCRC, now: start)
        let silent = ticks(&writer, to: .seconds(6))
        #expect(writer.interruptedSince == start + .milliseconds(5_250) && silent.allSatisfy { failure($0.actions) == nil })
        let late = ticks(&writer, from: .milliseconds(6_250), to: .seconds(37)).flatMap(\.actions)
        #expect(failure(late) == nil && completes(late) && !writer.isOpening)
    }

    @Test("two machines joined by a link that loses frames: after the resume the reader has every byte once, in order, and both complete")
    func resumeAcrossLoss() throws {
        var origin = pair(continuer: false, direction: .originToContinuer, window: 4, chunkSize: 10)
        var continuer = pair(continuer: true, direction: .originToContinuer, window: 4, chunkSize: 10)
        var toContinuer: Deque<(WireStreamFrame.OneOf_Kind, Frame?)> = []
        var toOrigin: Deque<WireStreamFrame.OneOf_Kind> = []
        var delivered = Data()
        var now = start
        func carry(_ actions: [StreamPair.Action], toward queue: inout Deque<(WireStreamFrame.OneOf_Kind, Frame?)>) {
            for case .send(let kind, let payload) in actions { queue.append((kind, payload)) }
        }
        func read(_ actions: [StreamPair.Action]) {
            for case .deliver(let bytes) in actions { delivered.append(bytes) }
        }

        var open = WireStreamOpen()
        open.direction = .originToContinuer
        open.window = 4
        open.chunkSize = 10
        for case .send(.open(let request), _) in continuer.open(open, now: now, answerWithin: .seconds(2)) {
            var answer = request
            answer.resumeToken = Data([1, 2])
            carry(origin.accept(request, answer: answer, now: now), toward: &toContinuer)
        }
        let payload = Data((0..<2_000).map { UInt8(truncatingIfNeeded: $0) })
        var written = 0
        var lost = 0
        var ended = false
        var completed = (origin: false, continuer: false)
        for step in 0..<2_000 {
            now += .milliseconds(100)
            // The originator writes while it may.
            while written < payload.count, origin.writerMayProceed {
                let frame = Frame([UInt8](payload[written..<written + 10]))
                carry(origin.write(StreamPair.SentChunk(offset: UInt64(written), frame: frame, total: 2_000), now: now), toward: &toContinuer)
                written += 10
            }
            if written == payload.count, !ended {
                ended = true
                carry(origin.writeEnd(total: 2_000, checksum: StreamPairTests.emptyCRC, now: now), toward: &toContinuer)
            }
            // The link drops everything from the 10th step to the 80th (seconds 1 to 8): a cut
            // longer than the idle timeout, mid-transfer.
            let cut = (10..<80).contains(step)
            while let (kind, payload) = toContinuer.popFirst() {
                if cut { lost += 1; continue }
                let actions = continuer.received(kind, chunk: payload.map { Data($0.dataWithoutCopying) }, now: now)
                read(actions)
                completed.continuer = completed.continuer || completes(actions)
                // The reader consumes at once and grants the credit back.
                let consumed = actions.count { if case .deliver = $0 { true } else { false } }
                for case .send(let back, _) in actions + (consumed > 0 ? continuer.consumed(chunks: consumed, now: now) : []) { toOrigin.append(back) }
            }
            while let kind = toOrigin.popFirst() {
                if cut { lost += 1; continue }
                let actions = origin.received(kind, now: now)
                carry(actions, toward: &toContinuer)
                completed.origin = completed.origin || completes(actions)
            }
            carry(origin.tick(now: now, limits: limits), toward: &toContinuer)
            for case .send(let kind, _) in continuer.tick(now: now, limits: limits) {
                if case .resume(let resume) = kind {
                    // A resume arrives on a new connection: the originator's node routes it to the pair.
                    if cut { lost += 1; continue }
                    carry(origin.resumeRequested(resume, now: now), toward: &toContinuer)
                } else {
                    toOrigin.append(kind)
                }
            }
            if completed.origin && completed.continuer { break }
        }
        #expect(lost > 0)
        #expect(origin.resumes >= 1 && continuer.resumes >= 1)
        #expect(byteDifference(delivered, payload) == nil)
        #expect(completed.origin && completed.continuer)
        #expect(origin.isLive && continuer.isLive)
    }
}
