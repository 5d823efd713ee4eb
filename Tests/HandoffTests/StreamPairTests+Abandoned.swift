import Foundation
import HandoffWire
import SwiftProtobuf
import Testing
@testable import Handoff

// What a pair does when its application's reader stops before the peer's end
// (``StreamPair/readerStopped(after:now:)``), or the application lets go of the pair
// (``StreamPair/applicationLetGo(readerTook:written:emptyEnd:now:)``), on the machine alone.
extension StreamPairTests {
    func cancelReason(_ actions: [StreamPair.Action]) -> String? {
        sent(actions).lazy.compactMap { if case .cancel(let cancel) = $0 { cancel.reason } else { nil } }.first
    }

    @Test("a stopped reader: the pair is cancelled at once, the peer told how far the reader got")
    func stoppedReaderOneWay() throws {
        var reader = pair(continuer: true, direction: .originToContinuer)
        _ = reader.dataArrived(data(at: 0), chunk: Data(repeating: 1, count: 100), now: start)
        _ = reader.dataArrived(data(at: 100), chunk: Data(repeating: 1, count: 100), now: start)
        let stopped = reader.readerStopped(after: 100, now: start + .seconds(1))
        #expect(try #require(cancelReason(stopped)).contains("after 100 bytes"))
        #expect(stopped.contains { if case .record(.readerStopped) = $0 { true } else { false } }, "counted")
        let error = try #require(failure(stopped))
        #expect(error.code == .streamCancelled && error.message.contains("100 of the 200 bytes"))
        #expect(reader.failedAt == start + .seconds(1))
        #expect(reader.readerStopped(after: 100, now: start + .seconds(2)).isEmpty, "once")
    }

    @Test("a stopped reader on a pair that still writes: the whole pair is cancelled (waiting for this side's end deadlocked two stopped readers), and its writer may not go on")
    func stoppedReaderStillWriting() throws {
        var both = pair(continuer: false)
        both.sendCredit = 4
        _ = both.write(chunk(at: 0), now: start)
        let stopped = both.readerStopped(after: 0, now: start)
        #expect(try #require(cancelReason(stopped)).contains("after 0 bytes"))
        #expect(failure(stopped)?.code == .streamCancelled && !both.isLive)
        #expect(both.writerMayProceed, "the writer wakes, to the failure")
        #expect(both.write(chunk(at: 100), now: start).isEmpty && both.writeEnd(total: 200, checksum: Self.emptyCRC, now: start).isEmpty)
    }

    @Test("a stopped reader: nothing happens once the peer's end arrived (the direction is over), on a direction it does not read, or after a failure")
    func stoppedReaderAfterTheEnd() {
        var ended = pair(continuer: true, direction: .originToContinuer)
        var end = WireStreamEnd()
        end.checksumAlgorithm = .crc32C
        end.checksum = Data(count: 4)
        _ = ended.endArrived(end, now: start)
        #expect(ended.readerStopped(after: 0, now: start).isEmpty && ended.isComplete)
        var writer = pair(continuer: false, direction: .originToContinuer)
        #expect(writer.readerStopped(after: 0, now: start).isEmpty && writer.isLive)
        var failed = pair(continuer: true, direction: .originToContinuer)
        _ = failed.fail(HandoffError(.peerLost, "gone"), now: start)
        #expect(failed.readerStopped(after: 0, now: start).isEmpty)
    }

    func endSent(_ actions: [StreamPair.Action]) -> WireStreamEnd? {
        sent(actions).lazy.compactMap { if case .end(let end) = $0 { end } else { nil } }.first
    }

    @Test("let go: bytes that arrived unread cancel the pair; with none arrived, the pair waits for the end, and the first bytes that come instead cancel it")
    func letGoUnread() throws {
        var reader = pair(continuer: true, direction: .originToContinuer)
        _ = reader.dataArrived(data(at: 0), chunk: Data(repeating: 1, count: 100), now: start)
        let letGo = reader.applicationLetGo(readerTook: 0, written: 0, emptyEnd: nil, now: start)
        #expect(try #require(cancelReason(letGo)).contains("with 100 bytes unread"))
        #expect(!reader.isLive)

        var waiting = pair(continuer: true, direction: .originToContinuer)
        #expect(waiting.applicationLetGo(readerTook: 0, written: 0, emptyEnd: nil, now: start).isEmpty && waiting.isLive)
        let arrived = waiting.dataArrived(data(at: 0), chunk: Data(repeating: 1, count: 100), now: start)
        #expect(try #require(cancelReason(arrived)).contains("100 bytes will not be read"))
        #expect(!arrived.contains { if case .deliver = $0 { true } else { false } })

        var ended = pair(continuer: true, direction: .originToContinuer)
        _ = ended.applicationLetGo(readerTook: 0, written: 0, emptyEnd: nil, now: start)
        var end = WireStreamEnd()
        end.checksumAlgorithm = .crc32C
        end.checksum = Data(count: 4)
        #expect(completes(ended.endArrived(end, now: start)), "an empty stream's end completes it")
    }

    @Test("let go: a writer that wrote nothing ends its direction as an empty stream, and the pair completes once the peer acknowledges it")
    func letGoUntouchedWriter() throws {
        var both = pair(continuer: true)
        var peersEnd = WireStreamEnd()
        peersEnd.checksumAlgorithm = .crc32C
        peersEnd.checksum = Data(count: 4)
        _ = both.endArrived(peersEnd, now: start)
        let letGo = both.applicationLetGo(readerTook: 0, written: 0, emptyEnd: Self.emptyCRC, now: start)
        let end = try #require(endSent(letGo), "\(letGo)")
        #expect(end.totalLength == 0 && end.checksum == Self.emptyCRC.value && cancelReason(letGo) == nil && both.isLive)
        let done = both.creditArrived(WireStreamCredit.with { $0.endReceived = true }, now: start)
        #expect(completes(done))
    }

    @Test("let go: a writer that wrote bytes without finishing cannot finish them: the pair is cancelled, never ended short")
    func letGoUnfinishedWriter() throws {
        var writer = pair(continuer: false, direction: .originToContinuer)
        writer.sendCredit = 4
        _ = writer.write(chunk(at: 0), now: start)
        let letGo = writer.applicationLetGo(readerTook: 0, written: 100, emptyEnd: nil, now: start)
        #expect(endSent(letGo) == nil)
        #expect(try #require(cancelReason(letGo)).contains("after writing 100 bytes, without finishing it"))
        #expect(letGo.contains { if case .record(.letGo) = $0 { true } else { false } }, "counted")
        #expect(failure(letGo)?.code == .streamCancelled)
    }

    @Test("let go: nothing to do once both directions are in hand (read to the end, the end written), or after a failure")
    func letGoNothingLeft() {
        var writer = pair(continuer: false, direction: .originToContinuer)
        writer.sendCredit = 1
        _ = writer.writeEnd(total: 0, checksum: Self.emptyCRC, now: start)
        #expect(writer.applicationLetGo(readerTook: 0, written: 0, emptyEnd: nil, now: start).isEmpty && writer.isLive)
        var failed = pair(continuer: true)
        _ = failed.fail(HandoffError(.peerLost, "gone"), now: start)
        #expect(failed.applicationLetGo(readerTook: 0, written: 0, emptyEnd: Self.emptyCRC, now: start).isEmpty)
    }
}
