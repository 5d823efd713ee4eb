import CHandoffChecksum
import Foundation
import HandoffWire
import Logging
import SwiftProtobuf
import ZeroMQ

/// One stream pair's state on a node. Owned by the node actor.
final class StreamSession {
    let key: StreamKey
    let activityID: String
    let activityType: String
    /// Bytes this node put on the wire, and took off it, for this pair (counted by the node, not
    /// the reader or writer task).
    var bytesSent: UInt64 = 0
    var bytesArrived: UInt64 = 0
    /// Bytes (sent, arrived) when progress was last published.
    var reported: (sent: UInt64, received: UInt64) = (0, 0)
    var failureReported = false
    /// Chunks this side may still send before the peer grants more.
    var sendCredit = 0
    var creditWaiter: CheckedContinuation<Void, Never>?
    /// The continuing side waits here for the originator's answer to its open.
    var openWaiter: CheckedContinuation<Result<WireStreamOpen, HandoffError>, Never>?
    let incoming: AsyncStream<StreamEvent>.Continuation
    let input: ContinuationInputStream
    let output: ContinuationOutputStream
    var lastHeard = ContinuousClock.now
    var lastSent = ContinuousClock.now
    var failure: HandoffError?
    var failedAt: ContinuousClock.Instant?
    var inputDone = false
    var outputDone = false

    init(node: Node, key: StreamKey, activityID: String, activityType: String, window: Int, chunkSize: Int) {
        self.key = key
        self.activityID = activityID
        self.activityType = activityType
        let (events, continuation) = AsyncStream.makeStream(of: StreamEvent.self)
        incoming = continuation
        input = ContinuationInputStream(node: node, key: key, events: events, window: window)
        output = ContinuationOutputStream(node: node, key: key, chunkSize: chunkSize)
    }

    var streams: ContinuationStreams {
        ContinuationStreams(id: key.id, activityID: activityID, input: input, output: output)
    }

    /// Ends the session with an error: the reader's iteration throws it, a waiting writer wakes to it.
    func fail(_ error: HandoffError) {
        guard failure == nil else { return }
        failure = error
        failedAt = .now
        incoming.yield(.failed(error))
        incoming.finish()
        creditWaiter?.resume()
        creditWaiter = nil
        openWaiter?.resume(returning: .failure(error))
        openWaiter = nil
    }
}

extension Node {
    /// The stream pairs open on this node right now (either side), e.g. to show their progress.
    public var openStreams: [ContinuationStreams] {
        streams.values.filter { $0.failure == nil }.map(\.streams)
    }

    // MARK: Opening (continuing side)

    /// Opens a pair of continuation streams with a continued activity's originator — Apple's
    /// `getContinuationStreams`. The originator's delegate receives its own pair in
    /// ``UserActivityDelegate/userActivity(_:didReceive:)``.
    ///
    /// - Parameter activity: An activity this node continued; its ``ContinuedActivity/supportsContinuationStreams`` must be set.
    /// - Returns: The input (bytes from the originator) and output (bytes to it).
    /// - Throws: ``HandoffError``: ``HandoffError/Code-swift.struct/streamsNotSupported``,
    ///   ``HandoffError/Code-swift.struct/connectionUnavailable``, ``HandoffError/Code-swift.struct/remoteApplicationTimedOut``,
    ///   ``HandoffError/Code-swift.struct/activityNotFound``.
    public func openStreams(for activity: ContinuedActivity) async throws(HandoffError) -> ContinuationStreams {
        guard runState == .running else {
            throw HandoffError(.notRunning, "start the node with run() before opening streams", activityType: activity.activityType)
        }
        guard activity.supportsContinuationStreams else {
            throw HandoffError(.streamsNotSupported, "the activity does not support continuation streams", activityType: activity.activityType)
        }
        let endpoint = activity.continueEndpoint
        _ = try await connectedClient(endpoint, serverKey: activity.origin.publicKey, activityType: activity.activityType)
        nextStreamID += 1
        let key = StreamKey(peer: .dealer(endpoint), id: nextStreamID)
        let session = StreamSession(
            node: self, key: key, activityID: activity.id, activityType: activity.activityType,
            window: configuration.streamWindow, chunkSize: configuration.streamChunkSize)
        streams[key] = session

        var open = WireStreamOpen()
        open.activityID = activity.id
        open.window = UInt32(configuration.streamWindow)
        open.chunkSize = UInt32(configuration.streamChunkSize)
        let timeout = configuration.continueTimeout
        let activityType = activity.activityType
        let answer: Result<WireStreamOpen, HandoffError> = await withCheckedContinuation { continuation in
            session.openWaiter = continuation
            sendStreamMessage(key, .open(open))
            Task { [weak self] in
                do { try await Task.sleep(for: timeout) } catch { return }
                await self?.failStream(key, HandoffError(.remoteApplicationTimedOut, "the originator at \(endpoint) did not answer the stream request within \(timeout)", activityType: activityType))
            }
        }
        switch answer {
        case .success(let accepted):
            session.sendCredit = Int(accepted.window)
            logger.debug("streams \(key.id) open with \(endpoint)")
            publishStreamEvent(.streamOpened, session)
            return session.streams
        case .failure(let error):
            streams[key] = nil
            throw error
        }
    }

    // MARK: Frames in

    /// Handles a StreamFrame from a peer (the payload, if any, is the frame after the envelope).
    func handleStreamFrame(_ frame: WireStreamFrame, payload: Frame?, from peer: StreamKey.Peer) {
        let key = StreamKey(peer: peer, id: frame.streamID)
        if case .open(let open) = frame.kind {
            switch peer {
            case .router: acceptStreams(open, key: key)
            case .dealer:
                guard let session = streams[key], let waiter = session.openWaiter else { return }
                session.openWaiter = nil
                session.lastHeard = .now
                waiter.resume(returning: .success(open))
            }
            return
        }
        guard let session = streams[key], session.failure == nil else { return }
        session.lastHeard = .now
        switch frame.kind {
        case .data(let data):
            let chunk = payload?.dataWithoutCopying ?? data.payload
            if data.totalLength > 0 { session.input.counter.setTotal(data.totalLength) }
            session.bytesArrived += UInt64(chunk.count)
            session.incoming.yield(.data(chunk))
        case .credit(let credit):
            session.sendCredit += Int(credit.chunks)
            if credit.chunks > 0, let waiter = session.creditWaiter {
                session.creditWaiter = nil
                waiter.resume()
            }
        case .end(let end):
            var checksum: UInt32?
            if end.checksumAlgorithm == .crc32C, end.checksum.count == 4 {
                checksum = end.checksum.reduce(0) { $0 << 8 | UInt32($1) }
            }
            session.incoming.yield(.end(total: end.totalLength, checksum: checksum))
            session.incoming.finish()
            session.inputDone = true
            removeIfDone(session)
        case .cancel(let cancel):
            session.fail(HandoffError(.streamCancelled, "the other side cancelled the stream: \(cancel.reason)"))
        case .error(let error):
            session.fail(HandoffError(wire: error))
        case .open, nil:
            break
        }
    }

    /// The originator's side of an open: checks the activity, answers, and hands the pair to the delegate.
    private func acceptStreams(_ open: WireStreamOpen, key: StreamKey) {
        func refuse(_ error: HandoffError) {
            var frame = WireStreamFrame()
            frame.streamID = key.id
            frame.error = error.wire
            sendFrame(frame, to: key.peer, payload: nil)
        }
        guard streams[key] == nil else { return }
        guard let activity = current[open.activityID] else {
            refuse(HandoffError(.activityNotFound, "\(info.name) has no current activity \(open.activityID)"))
            return
        }
        guard activity.supportsContinuationStreams, let delegate = activity.delegate else {
            refuse(HandoffError(.streamsNotSupported, activity.supportsContinuationStreams
                ? "the activity has no delegate to receive streams" : "the activity does not support continuation streams",
                activityType: activity.activityType))
            return
        }
        let session = StreamSession(
            node: self, key: key, activityID: activity.id, activityType: activity.activityType,
            window: configuration.streamWindow, chunkSize: min(configuration.streamChunkSize, Int(max(open.chunkSize, 1))))
        session.sendCredit = Int(open.window)
        streams[key] = session
        var answer = WireStreamOpen()
        answer.activityID = activity.id
        answer.window = UInt32(configuration.streamWindow)
        answer.chunkSize = UInt32(configuration.streamChunkSize)
        sendStreamMessage(key, .open(answer))
        publishStreamEvent(.streamOpened, session)
        let pair = session.streams
        spawn { await delegate.userActivity(activity, didReceive: pair) }
    }

    // MARK: Frames out

    private func sendFrame(_ frame: WireStreamFrame, to peer: StreamKey.Peer, payload: Frame?) {
        sequence += 1
        let bytes: [UInt8] = try! WireEnvelope(body: .streamFrame(frame), sender: info.wire, sequence: sequence).serializedBytes()
        do {
            switch peer {
            case .router(let identity):
                _ = try server.trySend(identity, more: true)
                _ = try server.trySend(bytes, more: payload != nil)
                if let payload { _ = try server.trySend(payload) }
            case .dealer(let endpoint):
                guard let client = clients[endpoint] else { return }
                guard try client.socket.trySend(bytes, more: payload != nil) else {
                    streams[StreamKey(peer: peer, id: frame.streamID)]?.fail(HandoffError(.peerLost, "the connection to \(endpoint) is gone"))
                    return
                }
                if let payload { _ = try client.socket.trySend(payload) }
            }
        } catch {
            streams[StreamKey(peer: peer, id: frame.streamID)]?.fail(HandoffError(.peerLost, "could not send on the stream: \(error)"))
        }
    }

    private func sendStreamMessage(_ key: StreamKey, _ kind: WireStreamFrame.OneOf_Kind, payload: Frame? = nil) {
        var frame = WireStreamFrame()
        frame.streamID = key.id
        frame.kind = kind
        sendFrame(frame, to: key.peer, payload: payload)
        streams[key]?.lastSent = .now
    }

    /// Sends one chunk, waiting for credit first.
    func sendStreamData(_ key: StreamKey, chunk: Frame, offset: UInt64, total: UInt64?) async throws(HandoffError) {
        guard let session = streams[key] else { throw HandoffError(.streamCancelled, "the stream is closed") }
        while session.sendCredit == 0 && session.failure == nil {
            await withCheckedContinuation { session.creditWaiter = $0 }
        }
        if let failure = session.failure { throw failure }
        session.sendCredit -= 1
        var data = WireStreamData()
        data.offset = offset
        data.length = UInt32(chunk.count)
        data.totalLength = total ?? 0
        sendStreamMessage(key, .data(data), payload: chunk)
        session.bytesSent += UInt64(chunk.count)
        if let failure = session.failure { throw failure }
    }

    /// Ends one direction with its length and checksum.
    func sendStreamEnd(_ key: StreamKey, total: UInt64, checksum: UInt32) throws(HandoffError) {
        guard let session = streams[key] else { throw HandoffError(.streamCancelled, "the stream is closed") }
        if let failure = session.failure { throw failure }
        var end = WireStreamEnd()
        end.totalLength = total
        end.checksumAlgorithm = .crc32C
        end.checksum = Data([UInt8(truncatingIfNeeded: checksum >> 24), UInt8(truncatingIfNeeded: checksum >> 16),
                             UInt8(truncatingIfNeeded: checksum >> 8), UInt8(truncatingIfNeeded: checksum)])
        sendStreamMessage(key, .end(end))
        session.outputDone = true
        removeIfDone(session)
    }

    /// Grants the writer credit for chunks the reader has consumed.
    func streamConsumed(_ key: StreamKey, chunks: Int) {
        guard let session = streams[key], session.failure == nil, !session.inputDone else { return }
        var credit = WireStreamCredit()
        credit.chunks = UInt32(chunks)
        sendStreamMessage(key, .credit(credit))
    }

    /// Cancels a stream pair here and tells the peer.
    func cancelStream(_ key: StreamKey, reason: String) {
        guard let session = streams[key], session.failure == nil else { return }
        var cancel = WireStreamCancel()
        cancel.reason = reason
        sendStreamMessage(key, .cancel(cancel))
        session.fail(HandoffError(.streamCancelled, "the stream was cancelled here: \(reason)"))
    }

    func failStream(_ key: StreamKey, _ error: HandoffError) {
        streams[key]?.fail(error)
    }

    private func removeIfDone(_ session: StreamSession) {
        guard session.inputDone && session.outputDone else { return }
        streams[session.key] = nil
        publishStreamEvent(.streamFinished, session)
    }

    /// Publishes what a stream pair did on the bus, for `handoff monitor`.
    func publishStreamEvent(_ kind: WireNodeEvent.Kind, _ session: StreamSession, detail: String = "") {
        var event = WireNodeEvent()
        event.kind = kind
        event.activityID = session.activityID
        event.activityType = session.activityType
        event.streamID = session.key.id
        event.bytesSent = session.bytesSent
        event.bytesReceived = session.bytesArrived
        event.expectedLength = session.input.progress.total ?? 0
        event.detail = detail
        session.reported = (event.bytesSent, event.bytesReceived)
        sendOnBus(topic: Topic.event(session.activityType), .nodeEvent(event))
    }

    // MARK: Liveness

    /// Called on every tick: keep-alives for quiet streams, failure for silent peers, cleanup.
    func superviseStreams(now: ContinuousClock.Instant) {
        for (key, session) in streams {
            if let failedAt = session.failedAt {
                if !session.failureReported {
                    session.failureReported = true
                    publishStreamEvent(.streamFailed, session, detail: session.failure.map { "\($0)" } ?? "")
                }
                if now - failedAt > .seconds(60) { streams[key] = nil }
                continue
            }
            if (session.bytesSent, session.bytesArrived) != session.reported {
                publishStreamEvent(.streamProgress, session)
            }
            if now - session.lastHeard > configuration.streamIdleTimeout {
                session.fail(HandoffError(.peerLost, "nothing heard from the other side for \(configuration.streamIdleTimeout): its process died or the network failed"))
            } else if now - session.lastSent > .seconds(1) {
                sendStreamMessage(key, .credit(WireStreamCredit()))
            }
        }
    }

    /// Fails every stream with an originator whose connection dropped.
    func failStreams(to endpoint: String, _ error: HandoffError) {
        for session in streams.values where session.key.peer == .dealer(endpoint) {
            session.fail(error)
        }
    }
}
