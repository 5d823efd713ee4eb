import Foundation
import HandoffExecutor
import HandoffWire
import Logging
import ZeroMQ

// Continuation streams: carrying out what a pair's machine (``StreamPair``) decided.
extension Node {
    /// Carries out a pair's actions: frames onto its socket, bytes to its reader, its waiters woken.
    func perform(_ actions: [StreamPair.Action], on session: StreamSession) {
        for action in actions {
            switch action {
            case .send(let kind, let payload):
                var frame = WireStreamFrame()
                frame.streamID = session.route.id
                frame.kind = kind
                if case .resume = kind, case .dealer(let endpoint) = session.route.peer, sockets.clients[endpoint] == nil {
                    // The client was closed (pruned, or dropped): connect again.
                    do { _ = try client(for: endpoint, serverKey: session.originKey) } catch {
                        own.logger.debug("streams \(session.route.id): cannot reconnect to \(endpoint): \(error)")
                        continue
                    }
                }
                // The open of a traced continue's activity carries its trace (wire.proto, "Tracing").
                let traceID: String? = if case .open = kind, session.isContinuer { session.traceID } else { nil }
                if !sendFrame(frame, to: session.route.peer, payload: payload, traceID: traceID) {
                    session.pair.transportRefused(now: .now)
                }
            case .deliver(let bytes):
                observability.metrics.streamed(in: bytes.count)
                EventLoops.handingOff { session.incoming.yield(.data(bytes)) }
            case .deliverEnd(let total, let checksum):
                session.incoming.yield(.end(total: total, checksum: checksum))
                session.incoming.finish()
            case .expectLength(let total):
                session.reading.counter.setTotal(total)
            case .opened(let answer):
                session.writing.setChunkSize(session.pair.writeChunkSize)
                session.reading.setWriterChecksum(session.pair.peerChecksum)
                session.openWaiter?.resume(returning: .success(answer))
                session.openWaiter = nil
            case .wakeWriter:
                session.wakeWriter()
            case .failed(let error):
                session.failed(error)
                traceEnded(session, "failed: \(error.code): \(error.message)")
            case .completed:
                guard streams[session.key] != nil else { continue }
                traceEnded(session, "complete: \(session.pair.bytesSent) bytes sent, \(session.pair.bytesArrived) received")
                forgetSession(session)
                publishStreamEvent(.streamFinished, session)
            case .record(let record):
                self.record(record, on: session)
            }
        }
    }

    private func record(_ record: StreamPair.Record, on session: StreamSession) {
        switch record {
        case .duplicateBytesDropped(let count):
            observability.streamCounters.duplicateBytesDropped += UInt64(count)
        case .bytesResent(let count):
            observability.streamCounters.bytesResent += UInt64(count)
        case .resumed(let peerHad, let wasInterrupted):
            observability.streamCounters.resumed += 1
            if wasInterrupted {
                let by = session.isContinuer ? "with the originator" : "by the continuing node"
                own.logger.info("streams \(session.route.id) resumed \(by): it had \(peerHad) bytes, this node \(session.pair.receivedOffset)")
            }
        case .violation(let error):
            observability.streamCounters.protocolViolations += 1
            if let since = peerLogLine(session.owner, "violation") {
                own.logger.warning("stream \(session.route.id) with \(session.owner): \(error.message)\(since)")
            }
        case .interruptedBySilence:
            own.logger.info("streams \(session.route.id): nothing heard from \(session.owner) for \(own.configuration.streamIdleTimeout); waiting up to \(own.configuration.streamResumeWindow) for it to resume")
        case .droppedAheadOfResume(let count):
            own.logger.debug("streams \(session.route.id): dropped \(count) bytes from \(session.owner) beyond a gap, its resume unanswered")
        case .endDroppedAheadOfResume(let total):
            own.logger.debug("streams \(session.route.id): dropped the end (\(total) bytes) from \(session.owner) beyond a gap after \(session.pair.receivedOffset) bytes, its resume unanswered")
        case .lost:
            observability.streamCounters.lost += 1
        case .endNotVerified(let carried, let announced, let total):
            observability.streamCounters.endsNotVerified += 1
            let computed = announced.map { "the \($0) its open announced" } ?? "none (its open announced an algorithm this node does not know)"
            guard let since = peerLogLine(session.owner, "unverified end") else { return }
            own.logger.notice("streams \(session.route.id) from \(session.owner): the end (\(total) bytes) carries \(StreamChecksum.carried(carried)), and this node computed \(computed): the length was checked, the bytes were not\(since)")
        case .readerStopped:
            observability.streamCounters.readersStopped += 1
        case .letGo:
            observability.streamCounters.letGo += 1
        case .stalled:
            observability.streamCounters.stalled += 1
            own.logger.info("streams \(session.route.id) with \(session.owner): no progress for \(own.configuration.streamStallTimeout.map { "\($0)" } ?? "-"); gave up")
        }
    }

    /// Whether a line about a peer's stream (`kind` of thing it did) is logged now: `nil` if not,
    /// else what to add to it (how many went unlogged). Once a minute per peer and kind: each is
    /// counted all the same, and a peer that does it on every pair it opens does not write a line
    /// each.
    private func peerLogLine(_ owner: String, _ kind: String) -> String? {
        guard let unlogged = observability.streamPeerLog.admit("\(owner) \(kind)", now: .now) else { return nil }
        return unlogged == 0 ? "" : " (\(unlogged) more such from this peer since the last line; logged at most once a minute per peer)"
    }

    /// Puts a stream frame on the wire. Returns false when the transport refused it (a DEALER with
    /// no connection, ZMQ_IMMEDIATE): the pair is interrupted. ROUTER drops frames for a peer that
    /// is gone without telling; a resume sends them again.
    @discardableResult
    func sendFrame(_ frame: WireStreamFrame, to peer: StreamRoute.Peer, payload: Frame?, traceID: String? = nil) -> Bool {
        let bytes = envelopes.bytes(.streamFrame(frame), traceID: traceID)
        var sent = true
        do {
            switch peer {
            case .router(let identity):
                _ = try sockets.server.trySend(identity, more: true)
                _ = try sockets.server.trySend(bytes, more: payload != nil)
                if let payload { _ = try sockets.server.trySend(payload) }
                observability.metrics.sent(on: .continuationServer, bytes: identity.count + bytes.count + (payload?.count ?? 0))
            case .dealer(let endpoint):
                guard let client = sockets.clients[endpoint] else { return true }
                sent = try client.socket.trySend(bytes, more: payload != nil)
                if sent, let payload { _ = try client.socket.trySend(payload) }
                if sent { observability.metrics.sent(on: .continuationClient, bytes: bytes.count + (payload?.count ?? 0)) }
            }
        } catch {
            own.logger.debug("could not send on stream \(frame.streamID): \(error)")
            sent = false
        }
        if sent, let payload { observability.metrics.streamed(out: payload.count) }
        return sent
    }
}
