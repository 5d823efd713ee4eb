import DequeModule
import Foundation
import HandoffWire
import Testing
import ZeroMQ

@testable import Handoff
import HandoffTestSupport

/// A pair's bookkeeping on its own, no traffic: what `stream.proto` promises about offsets, credit,
/// acknowledgements and resumes, checked against `StreamSession` directly.
@Suite("One stream pair's bookkeeping", .exclusive)
struct StreamSessionTests {
    /// A node that never runs: a session needs one for its input and output halves.
    static let node = try! Node(configuration: testConfiguration("bookkeeper"))

    func session(continuer: Bool = true, direction: WireStreamDirection = .unspecified, window: Int = 4, chunkSize: Int = 100) -> StreamSession {
        StreamSession(
            node: Self.node, key: StreamKey(local: 1), route: StreamRoute(peer: .dealer("tcp://127.0.0.1:1"), id: 1),
            isContinuer: continuer, activityID: "activity", activityType: "org.handoff.test.bulk",
            direction: direction, owner: "peer", window: window, chunkSize: chunkSize, peerChunkSize: chunkSize)
    }

    func chunk(at offset: UInt64, _ count: Int = 100) -> StreamSession.SentChunk {
        StreamSession.SentChunk(offset: offset, frame: Frame([UInt8](repeating: 7, count: count)), total: 0)
    }

    @Test("a chunk in order is delivered whole; one sent again after a resume is dropped, an overlap only in part")
    func arrivals() {
        let pair = session()
        #expect(pair.arrival(offset: 0, count: 100) == .deliver(from: 0))
        pair.receivedOffset = 100
        pair.creditOutstanding -= 1
        #expect(pair.arrival(offset: 0, count: 100) == .duplicate)
        #expect(pair.arrival(offset: 50, count: 100) == .deliver(from: 50))
        #expect(pair.arrival(offset: 100, count: 100) == .deliver(from: 0))
    }

    @Test("a gap, an oversized chunk, a chunk past the credit or on an excluded direction is a violation")
    func violations() {
        let pair = session(window: 2)
        guard case .violation(let gap) = pair.arrival(offset: 200, count: 100) else { Issue.record("a gap must be refused"); return }
        #expect(gap.contains("gap"))
        guard case .violation(let size) = pair.arrival(offset: 0, count: 101) else { Issue.record("an oversized chunk must be refused"); return }
        #expect(size.contains("larger"))
        pair.creditOutstanding = 0
        guard case .violation(let credit) = pair.arrival(offset: 0, count: 100) else { Issue.record("a chunk past the credit must be refused"); return }
        #expect(credit.contains("window"))

        // Opened "from the originator only": the continuer writes nothing and receives only.
        let oneWay = session(continuer: false, direction: .originToContinuer)
        guard case .violation(let excluded) = oneWay.arrival(offset: 0, count: 10) else { Issue.record("data on an excluded direction must be refused"); return }
        #expect(excluded.contains("excluded"))
        #expect(oneWay.writes && !oneWay.reads && oneWay.endReceived && !oneWay.endAcknowledged)
        let reader = session(continuer: true, direction: .originToContinuer)
        #expect(!reader.writes && reader.reads && reader.endAcknowledged && !reader.endReceived)
    }

    @Test("an acknowledgement forgets what the peer has; the acknowledged end forgets everything")
    func acknowledgements() {
        let pair = session()
        pair.retained = [chunk(at: 0), chunk(at: 100), chunk(at: 200)]
        pair.acknowledge(upTo: 150, endReceived: false)
        #expect(pair.retained.map(\.offset) == [100, 200])  // the chunk at 100 is only half acknowledged
        pair.acknowledge(upTo: 300, endReceived: true)  // no end was written yet: nothing more to do
        #expect(pair.retained.isEmpty && !pair.endAcknowledged)
        pair.end = WireStreamEnd()
        pair.retained = [chunk(at: 300)]
        pair.acknowledge(upTo: 300, endReceived: true)
        #expect(pair.retained.isEmpty && pair.endAcknowledged && !pair.endNeedsSending)
    }

    @Test("a resume sends again exactly what the peer lacks, the end too, under the credit it grants")
    func rewind() {
        let pair = session()
        pair.retained = [chunk(at: 0), chunk(at: 100), chunk(at: 200)]
        pair.end = WireStreamEnd()
        pair.sendCredit = 0
        pair.rewind(to: 100, credit: 3, endReceived: false)
        #expect(pair.resend.map(\.offset) == [100, 200])
        #expect(pair.retained.isEmpty)
        #expect(pair.sendCredit == 3)
        #expect(pair.endNeedsSending)
        #expect(!pair.writerMayProceed)  // resends go first

        let done = session()
        done.retained = [chunk(at: 0)]
        done.end = WireStreamEnd()
        done.rewind(to: 100, credit: 4, endReceived: true)
        #expect(done.resend.isEmpty && done.endAcknowledged && !done.endNeedsSending)
    }

    @Test("the credit granted on a resume is the window less what the reader still holds")
    func resumeGrant() {
        let pair = session(window: 8)
        pair.unconsumed = 3
        #expect(pair.resumeGrant() == 5)
        pair.unconsumed = 12
        #expect(pair.resumeGrant() == 0)
    }

    @Test("a pair waits on its peer when it has no credit or nothing to read; not while its own reader holds chunks")
    func waitsOnPeer() {
        let writer = session(continuer: false, direction: .originToContinuer)
        #expect(writer.waitsOnPeer)  // no credit granted yet
        writer.sendCredit = 4
        #expect(!writer.waitsOnPeer)

        let reader = session(continuer: true, direction: .originToContinuer)
        #expect(reader.waitsOnPeer)  // nothing arrived
        reader.unconsumed = 1
        #expect(!reader.waitsOnPeer)  // its own reader is behind, not the peer
        reader.interruptedSince = .now
        #expect(reader.waitsOnPeer)
    }

    @Test("a failure is final: the first error stays, and everything kept is dropped")
    func failure() {
        let pair = session()
        pair.retained = [chunk(at: 0)]
        pair.resend = [chunk(at: 100)]
        pair.fail(HandoffError(.peerLost, "first"))
        pair.fail(HandoffError(.streamCancelled, "second"))
        #expect(pair.failure?.code == .peerLost)
        #expect(pair.retained.isEmpty && pair.resend.isEmpty)
        #expect(pair.writerMayProceed)  // a waiting writer wakes to the error
        #expect(!pair.isComplete)
    }
}
