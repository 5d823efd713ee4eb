import Foundation
import HandoffWire
import Logging
import ZeroMQ

// Continuation streams: what the application does with a pair (write, end, read, cancel), handed
// to its machine, and what the bus hears of it.
extension Node {
    /// Sends one chunk, waiting for credit first (and, while the pair is interrupted, for the resume).
    func sendStreamData(_ key: StreamKey, chunk: Frame, offset: UInt64, total: UInt64?) async throws(HandoffError) {
        guard let session = streams[key] else { throw HandoffError(.streamCancelled, "the stream is closed") }
        guard session.pair.writes else {
            throw HandoffError(.streamsNotSupported, "the pair was opened \(session.pair.direction == .originToContinuer ? "from the originator only" : "to the originator only"): this side does not write", activityType: session.activityType)
        }
        while !session.pair.writerMayProceed {
            await withCheckedContinuation { session.creditWaiter = $0 }
        }
        if let failure = session.failure { throw failure }
        perform(session.pair.write(StreamPair.SentChunk(offset: offset, frame: chunk, total: total ?? 0), now: .now), on: session)
    }

    /// Ends one direction with its length and checksum (kept, and sent again after a resume, until
    /// the peer acknowledges it).
    func sendStreamEnd(_ key: StreamKey, total: UInt64, checksum: StreamEndChecksum) throws(HandoffError) {
        guard let session = streams[key] else { throw HandoffError(.streamCancelled, "the stream is closed") }
        if let failure = session.failure { throw failure }
        perform(session.pair.writeEnd(total: total, checksum: checksum, now: .now), on: session)
    }

    /// Grants the writer credit for chunks the reader has consumed.
    func streamConsumed(_ key: StreamKey, chunks: Int) {
        guard let session = streams[key] else { return }
        perform(session.pair.consumed(chunks: chunks, now: .now), on: session)
    }

    /// The application's reader of a pair stopped before the end, having taken `bytes`
    /// (``StreamPair/readerStopped(after:now:)``).
    /// Not once the node stops: its shutdown notice tells the peer (``StoppingFlag``).
    func streamReaderStopped(_ key: StreamKey, after bytes: UInt64) {
        guard !stopping.isRaised, let session = streams[key] else { return }
        perform(session.pair.readerStopped(after: bytes, now: .now), on: session)
    }

    /// The application let go of every handle of a pair's hold of `generation` (``ApplicationHold``):
    /// unless it holds the pair again, what it left is ended (``StreamPair/applicationLetGo(readerTook:written:emptyEnd:now:)``).
    /// Not once the node stops, as above.
    func applicationLetGo(_ key: StreamKey, generation: Int) {
        guard !stopping.isRaised, let session = streams[key], !session.heldAfterLetGo(of: generation), session.pair.isLive else { return }
        let (written, emptyEnd) = session.writing.letGo()
        let readerTook = session.reading.counter.progress.bytes
        perform(session.pair.applicationLetGo(readerTook: readerTook, written: written, emptyEnd: emptyEnd, now: .now), on: session)
    }

    /// Ends a pair with an error its peer is told of (its code and message).
    func failStream(_ key: StreamKey, _ error: HandoffError) {
        guard let session = streams[key] else { return }
        perform(session.pair.fail(error, telling: .error(error.wire), now: .now), on: session)
    }

    /// Cancels a stream pair here and tells the peer.
    func cancelStream(_ key: StreamKey, reason: String) {
        guard let session = streams[key] else { return }
        perform(session.pair.cancel(telling: reason, now: .now), on: session)
    }

    /// Publishes what a stream pair did on the bus, for `handoff monitor`: its progress as it
    /// goes, its opening and end within its peer's budget (``PeerEventBudget``).
    func publishStreamEvent(_ kind: WireNodeEvent.Kind, _ session: StreamSession, detail: String = "") {
        var event = WireNodeEvent()
        event.kind = kind
        event.activityID = session.activityID
        event.activityType = session.activityType
        event.streamID = session.route.id
        event.bytesSent = session.pair.bytesSent
        event.bytesReceived = session.pair.bytesArrived
        event.expectedLength = session.reading.counter.progress.total ?? 0
        event.detail = detail
        if let peer = session.peer { event.peer = peer }
        session.reported = (event.bytesSent, event.bytesReceived)
        if kind == .streamProgress {
            sendOnBus(topic: Topic.event(session.activityType), .nodeEvent(event))
        } else {
            publishPeerEvent(about: session.owner, event)
        }
    }
}
