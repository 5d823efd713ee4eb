import DequeModule
import Foundation
import HandoffWire
import Logging
import SwiftProtobuf
import ZeroMQ

// Continuation streams: frames out, credit-bounded writing, ends and cancels.
extension Node {
    // MARK: Frames out

    func sendFrame(_ frame: WireStreamFrame, to peer: StreamRoute.Peer, payload: Frame?) {
        let bytes = envelopes.bytes(.streamFrame(frame))
        var interrupted = false
        do {
            switch peer {
            case .router(let identity):
                // ROUTER drops frames for a peer that is gone; a resume sends them again.
                _ = try sockets.server.trySend(identity, more: true)
                _ = try sockets.server.trySend(bytes, more: payload != nil)
                if let payload { _ = try sockets.server.trySend(payload) }
                observability.metrics.sent(on: .continuationServer, bytes: identity.count + bytes.count + (payload?.count ?? 0))
            case .dealer(let endpoint):
                guard let client = sockets.clients[endpoint] else { return }
                // With ZMQ_IMMEDIATE the DEALER refuses while it has no connection.
                interrupted = try !client.socket.trySend(bytes, more: payload != nil)
                if !interrupted, let payload { _ = try client.socket.trySend(payload) }
                if !interrupted { observability.metrics.sent(on: .continuationClient, bytes: bytes.count + (payload?.count ?? 0)) }
            }
        } catch {
            own.logger.debug("could not send on stream \(frame.streamID): \(error)")
            interrupted = true
        }
        if !interrupted, let payload { observability.metrics.streamed(out: payload.count) }
        if interrupted, let session = streams.live(on: StreamRoute(peer: peer, id: frame.streamID)),
           session.interruptedSince == nil, session.openWaiter == nil {
            session.interruptedSince = .now
        }
    }

    func sendStreamMessage(_ session: StreamSession, _ kind: WireStreamFrame.OneOf_Kind, payload: Frame? = nil) {
        var frame = WireStreamFrame()
        frame.streamID = session.route.id
        frame.kind = kind
        session.lastSent = .now
        sendFrame(frame, to: session.route.peer, payload: payload)
    }

    func transmit(_ chunk: StreamSession.SentChunk, on session: StreamSession) {
        var data = WireStreamData()
        data.offset = chunk.offset
        data.length = UInt32(chunk.frame.count)
        data.totalLength = chunk.total
        session.sendCredit -= 1
        session.retained.append(chunk)
        session.bytesSent += UInt64(chunk.frame.count)
        sendStreamMessage(session, .data(data), payload: chunk.frame)
    }

    /// Sends what a resume asked for again (within credit), then the end if it is due, and lets the
    /// writer go on when it may.
    func pump(_ session: StreamSession) {
        guard session.failure == nil else { return }
        while session.sendCredit > 0, session.interruptedSince == nil,
              session.retained.count < Self.maxUnacknowledgedChunks, let chunk = session.resend.popFirst() {
            transmit(chunk, on: session)
            session.bytesResent += UInt64(chunk.frame.count)
            observability.streamCounters.bytesResent += UInt64(chunk.frame.count)
        }
        if session.resend.isEmpty, session.endNeedsSending, session.interruptedSince == nil, let end = session.end {
            session.endNeedsSending = false
            sendStreamMessage(session, .end(end))
        }
        if writerMayProceed(session) { session.wakeWriter() }
    }

    func writerMayProceed(_ session: StreamSession) -> Bool {
        session.writerMayProceed && (session.failure != nil || session.retained.count < Self.maxUnacknowledgedChunks)
    }

    /// Sends one chunk, waiting for credit first (and, while the pair is interrupted, for the resume).
    func sendStreamData(_ key: StreamKey, chunk: Frame, offset: UInt64, total: UInt64?) async throws(HandoffError) {
        guard let session = streams[key] else { throw HandoffError(.streamCancelled, "the stream is closed") }
        guard session.writes else {
            throw HandoffError(.streamsNotSupported, "the pair was opened \(session.direction == .originToContinuer ? "from the originator only" : "to the originator only"): this side does not write", activityType: session.activityType)
        }
        while !writerMayProceed(session) {
            await withCheckedContinuation { session.creditWaiter = $0 }
        }
        if let failure = session.failure { throw failure }
        transmit(StreamSession.SentChunk(offset: offset, frame: chunk, total: total ?? 0), on: session)
    }

    /// Ends one direction with its length and checksum (kept, and sent again after a resume, until
    /// the peer acknowledges it).
    func sendStreamEnd(_ key: StreamKey, total: UInt64, checksum: UInt32) throws(HandoffError) {
        guard let session = streams[key] else { throw HandoffError(.streamCancelled, "the stream is closed") }
        if let failure = session.failure { throw failure }
        guard session.writes else { return }  // nothing to end on an excluded direction
        var end = WireStreamEnd()
        end.totalLength = total
        end.checksumAlgorithm = .crc32C
        end.checksum = Data([UInt8(truncatingIfNeeded: checksum >> 24), UInt8(truncatingIfNeeded: checksum >> 16),
                             UInt8(truncatingIfNeeded: checksum >> 8), UInt8(truncatingIfNeeded: checksum)])
        session.end = end
        session.endNeedsSending = true
        pump(session)
    }

    /// Grants the writer credit for chunks the reader has consumed.
    func streamConsumed(_ key: StreamKey, chunks: Int) {
        guard let session = streams[key], session.failure == nil else { return }
        session.unconsumed = max(0, session.unconsumed - chunks)
        guard !session.endReceived else { return }
        session.creditOutstanding += chunks
        sendStreamMessage(session, .credit(acknowledgement(of: session, chunks: chunks)))
    }

    /// Cancels a stream pair here and tells the peer.
    /// Ends a pair with an error its peer is told of (its code and message).
    func failStream(_ key: StreamKey, _ error: HandoffError) {
        guard let session = streams[key], session.failure == nil else { return }
        sendStreamMessage(session, .error(error.wire))
        session.fail(error)
    }

    func cancelStream(_ key: StreamKey, reason: String) {
        guard let session = streams[key], session.failure == nil else { return }
        var cancel = WireStreamCancel()
        cancel.reason = reason
        sendStreamMessage(session, .cancel(cancel))
        session.fail(HandoffError(.streamCancelled, "the stream was cancelled here: \(reason)", activityType: session.activityType))
    }

    func removeIfDone(_ session: StreamSession) {
        guard session.isComplete, streams[session.key] != nil else { return }
        forgetSession(session)
        publishStreamEvent(.streamFinished, session)
    }

    /// Publishes what a stream pair did on the bus, for `handoff monitor`.
    func publishStreamEvent(_ kind: WireNodeEvent.Kind, _ session: StreamSession, detail: String = "") {
        var event = WireNodeEvent()
        event.kind = kind
        event.activityID = session.activityID
        event.activityType = session.activityType
        event.streamID = session.route.id
        event.bytesSent = session.bytesSent
        event.bytesReceived = session.bytesArrived
        event.expectedLength = session.input.progress.total ?? 0
        event.detail = detail
        session.reported = (event.bytesSent, event.bytesReceived)
        sendOnBus(topic: Topic.event(session.activityType), .nodeEvent(event))
    }
}
