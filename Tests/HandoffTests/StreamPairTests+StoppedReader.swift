import Foundation
import HandoffWire
import SwiftProtobuf
import Testing
@testable import Handoff

// What a pair does when its application's reader stops before the peer's end
// (``StreamPair/readerStopped(after:now:)``), on the machine alone.
extension StreamPairTests {
    func cancelReason(_ actions: [StreamPair.Action]) -> String? {
        sent(actions).lazy.compactMap { if case .cancel(let cancel) = $0 { cancel.reason } else { nil } }.first
    }

    @Test("a stopped reader: a pair that writes nothing is cancelled at once, the peer told how far the reader got")
    func stoppedReaderOneWay() throws {
        var reader = pair(continuer: true, direction: .originToContinuer)
        _ = reader.dataArrived(data(at: 0), chunk: Data(repeating: 1, count: 100), now: start)
        _ = reader.dataArrived(data(at: 100), chunk: Data(repeating: 1, count: 100), now: start)
        let stopped = reader.readerStopped(after: 100, now: start + .seconds(1))
        #expect(try #require(cancelReason(stopped)).contains("after 100 bytes"))
        let error = try #require(failure(stopped))
        #expect(error.code == .streamCancelled && error.message.contains("100 of the 200 bytes"))
        #expect(reader.failedAt == start + .seconds(1))
        #expect(reader.readerStopped(after: 100, now: start + .seconds(2)).isEmpty, "once")
    }

    @Test("a stopped reader: a pair that still writes goes on writing; it is cancelled once the peer acknowledges its end, not before")
    func stoppedReaderStillWriting() throws {
        var both = pair(continuer: false)
        both.sendCredit = 4
        #expect(both.readerStopped(after: 0, now: start).isEmpty)
        #expect(both.isLive)
        let written = both.write(chunk(at: 0), now: start)
        guard case .data = try #require(sent(written).first) else { Issue.record("the writer goes on: \(written)"); return }
        let ended = both.writeEnd(total: 100, checksum: Self.emptyCRC, now: start)
        guard case .end = try #require(sent(ended).first) else { Issue.record("its end goes out: \(ended)"); return }
        #expect(both.isLive && cancelReason(ended) == nil, "the end is not acknowledged yet")
        let partly = both.creditArrived(WireStreamCredit.with { $0.acknowledgedOffset = 100 }, now: start)
        #expect(both.isLive && cancelReason(partly) == nil, "the bytes are, the end is not")
        let acknowledged = both.creditArrived(WireStreamCredit.with { $0.acknowledgedOffset = 100; $0.endReceived = true }, now: start)
        #expect(try #require(cancelReason(acknowledged)).contains("after 0 bytes"))
        #expect(failure(acknowledged)?.code == .streamCancelled && !completes(acknowledged))
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

    @Test("a stopped reader on a pair that still writes: when a resume brings the peer's acknowledgement of the end, the pair is cancelled then")
    func stoppedReaderAcrossResume() throws {
        var both = pair(continuer: true)
        both.sendCredit = 4
        _ = both.write(chunk(at: 0), now: start)
        _ = both.writeEnd(total: 100, checksum: Self.emptyCRC, now: start)
        _ = both.readerStopped(after: 0, now: start)
        both.transportRefused(now: start)
        var answer = WireStreamResume()
        answer.receivedOffset = 100
        answer.window = 4
        answer.endReceived = true
        let resumed = both.received(.resume(answer), now: start + .seconds(1))
        #expect(cancelReason(resumed) != nil && !both.isLive)
    }
}
