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

    @Test("a stopped reader: the pair is cancelled at once, the peer told how far the reader got")
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
}
