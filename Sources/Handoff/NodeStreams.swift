import DequeModule
import Foundation
import HandoffWire
import Logging
import SwiftProtobuf
import ZeroMQ

extension Node {
    /// The stream pairs open on this node right now (either side), e.g. to show their progress.
    public var openStreams: [ContinuationStreams] {
        streams.values.filter { $0.failure == nil }.sorted { $0.key.local < $1.key.local }.map(\.streams)
    }

    /// What the node's stream pairs did so far: resumes, bytes sent twice, refusals.
    public var streamCounters: StreamCounters { streamCountersStorage }

    /// What a node's continuation streams did so far.
    public struct StreamCounters: Sendable, Hashable {
        /// Pairs picked up again after their connection broke or went silent.
        public var resumed = 0
        /// Bytes sent a second time after resumes (what the interruption cost).
        public var bytesResent: UInt64 = 0
        /// Bytes that arrived a second time after resumes, and were dropped.
        public var duplicateBytesDropped: UInt64 = 0
        /// Pairs ended because the peer broke the stream's rules (credit, chunk size, offsets).
        public var protocolViolations = 0
        /// Opens refused because of the limits on open streams.
        public var refusedOverLimit = 0
        /// Pairs that failed because the peer stayed silent past the resume window.
        public var lost = 0
        /// Pairs ended under pressure to make room, for making no progress (``Configuration-swift.struct/streamStallGrace``).
        public var evicted = 0

        public init() {}
    }

    /// Writers never have more chunks unacknowledged than this, whatever credit a peer grants, so
    /// what a writer keeps for a resume is bounded too.
    static let maxUnacknowledgedChunks = 64

    // MARK: Opening (continuing side)

    /// Opens a pair of continuation streams with a continued activity's originator — Apple's
    /// `getContinuationStreams`. The originator's delegate receives its own pair in
    /// ``UserActivityDelegate/userActivity(_:didReceive:)``.
    ///
    /// The open waits for the originator's answer for ``Configuration-swift.struct/continueTimeout``;
    /// after that, nothing bounds the pair's duration: it lives while it makes progress or its peer
    /// answers keep-alives, and survives a broken connection that comes back within
    /// ``Configuration-swift.struct/streamResumeWindow`` (it resumes where it stopped).
    ///
    /// - Parameters:
    ///   - activity: An activity this node continued; its ``ContinuedActivity/supportsContinuationStreams`` must be set.
    ///   - direction: Which halves to open: `.fromOriginator` only reads (nothing to finish on the
    ///     output), `.toOriginator` only writes.
    /// - Returns: The input (bytes from the originator) and output (bytes to it).
    /// - Throws: ``HandoffError``: ``HandoffError/Code-swift.struct/streamsNotSupported``,
    ///   ``HandoffError/Code-swift.struct/connectionUnavailable``, ``HandoffError/Code-swift.struct/remoteApplicationTimedOut``
    ///   (no answer to the open), ``HandoffError/Code-swift.struct/activityNotFound``,
    ///   ``HandoffError/Code-swift.struct/tooManyStreams``.
    public func openStreams(
        for activity: ContinuedActivity, direction: StreamDirection = .both
    ) async throws(HandoffError) -> ContinuationStreams {
        guard runState == .running else {
            throw HandoffError(.notRunning, "start the node with run() before opening streams", activityType: activity.activityType)
        }
        guard activity.supportsContinuationStreams else {
            throw HandoffError(.streamsNotSupported, "the activity does not support continuation streams", activityType: activity.activityType)
        }
        let open = streams.values.count { $0.failure == nil }
        guard open < configuration.maxStreams else {
            throw HandoffError(.tooManyStreams, "this node already has \(open) stream pairs open, its limit (maxStreams)", activityType: activity.activityType)
        }
        let endpoint = activity.continueEndpoint
        _ = try await connectedClient(endpoint, serverKey: activity.origin.publicKey, activityType: activity.activityType)
        nextStreamID += 1
        let session = makeSession(
            route: StreamRoute(peer: .dealer(endpoint), id: nextStreamID), isContinuer: true,
            activityID: activity.id, activityType: activity.activityType, direction: direction.wire,
            owner: activity.origin.id, peerChunkSize: configuration.streamChunkSize)
        session.originKey = activity.origin.publicKey

        var request = WireStreamOpen()
        request.activityID = activity.id
        request.direction = direction.wire
        request.window = UInt32(configuration.streamWindow)
        request.chunkSize = UInt32(configuration.streamChunkSize)
        let timeout = configuration.continueTimeout
        let activityType = activity.activityType
        let key = session.key
        // Bounds the wait for the answer, and only that: cancelled as soon as the answer arrives.
        let timer = Task { [weak self] in
            do { try await Task.sleep(for: timeout) } catch { return }
            await self?.failUnansweredOpen(key, HandoffError(.remoteApplicationTimedOut, "the originator at \(endpoint) did not answer the request to open streams within \(timeout) (continueTimeout)", activityType: activityType))
        }
        let answer: Result<WireStreamOpen, HandoffError> = await withCheckedContinuation { continuation in
            session.openWaiter = continuation
            sendStreamMessage(session, .open(request))
        }
        timer.cancel()
        switch answer {
        case .success(let accepted):
            guard accepted.direction == request.direction else {
                let error = HandoffError(.streamProtocolViolation, "the originator answered an open of \(direction) with direction \(accepted.direction)", activityType: activityType)
                violate(session, error)
                throw error
            }
            session.sendCredit = Int(accepted.window)
            session.peerChunkSize = Self.chunkSize(announced: accepted.chunkSize)
            session.output.setChunkSize(min(configuration.streamChunkSize, session.peerChunkSize))
            session.resumeToken = accepted.resumeToken
            if accepted.expectedLength > 0 { session.input.counter.setTotal(accepted.expectedLength) }
            session.lastHeard = .now
            logger.debug("streams \(session.route.id) open with \(endpoint) (\(direction))")
            publishStreamEvent(.streamOpened, session)
            return session.streams
        case .failure(let error):
            forgetSession(session)
            throw error
        }
    }

    private func failUnansweredOpen(_ key: StreamKey, _ error: HandoffError) {
        guard let session = streams[key], session.openWaiter != nil else { return }
        session.fail(error)
    }

    /// A chunk size announced in a StreamOpen; 0 means the contract's default.
    static func chunkSize(announced: UInt32) -> Int {
        announced == 0 ? 256 * 1024 : Int(announced)
    }

    private func makeSession(
        route: StreamRoute, isContinuer: Bool, activityID: String, activityType: String,
        direction: WireStreamDirection, owner: String, peerChunkSize: Int
    ) -> StreamSession {
        nextLocalStream += 1
        let session = StreamSession(
            node: self, key: StreamKey(local: nextLocalStream), route: route, isContinuer: isContinuer,
            activityID: activityID, activityType: activityType, direction: direction, owner: owner,
            window: configuration.streamWindow, chunkSize: configuration.streamChunkSize, peerChunkSize: peerChunkSize)
        streams[session.key] = session
        streamRoutes[route] = session.key
        return session
    }

    private func forgetSession(_ session: StreamSession) {
        streams[session.key] = nil
        if streamRoutes[session.route] == session.key { streamRoutes[session.route] = nil }
    }

    // MARK: Frames in

    /// Handles a StreamFrame from a peer (the payload, if any, is the frame after the envelope).
    /// `owner` names the peer for the per-peer limit (its CURVE key, or its node id).
    func handleStreamFrame(_ frame: WireStreamFrame, payload: Frame?, from peer: StreamRoute.Peer, owner: String) {
        let route = StreamRoute(peer: peer, id: frame.streamID)
        switch (frame.kind, peer) {
        case (.open(let open), .router):
            acceptStreams(open, route: route, owner: owner)
            return
        case (.resume(let resume), .router):
            resumeAsOriginator(resume, route: route)
            return
        default:
            break
        }
        guard let key = streamRoutes[route], let session = streams[key], session.failure == nil else { return }
        session.lastHeard = .now
        switch frame.kind {
        case .open(let open):
            guard let waiter = session.openWaiter else { return }
            session.openWaiter = nil
            waiter.resume(returning: .success(open))
        case .data(let data):
            receive(data, payload: payload, on: session)
        case .credit(let credit):
            session.sendCredit += Int(credit.chunks)
            session.acknowledge(upTo: credit.acknowledgedOffset, endReceived: credit.endReceived)
            pump(session)
            removeIfDone(session)
        case .end(let end):
            receive(end, on: session)
        case .resume(let resume):
            // The originator's answer to this node's resume.
            guard session.isContinuer else { return }
            if session.interruptedSince != nil {
                logger.info("streams \(session.route.id) resumed with the originator: it had \(resume.receivedOffset) bytes, this node \(session.receivedOffset)")
            }
            session.interruptedSince = nil
            session.lastResumeSent = nil
            applyResume(resume, to: session)
        case .cancel(let cancel):
            session.fail(HandoffError(.streamCancelled, "the other side cancelled the stream: \(cancel.reason)", activityType: session.activityType))
        case .error(let error):
            session.fail(HandoffError(wire: error, activityType: session.activityType))
        case nil:
            break
        }
    }

    private func receive(_ data: WireStreamData, payload: Frame?, on session: StreamSession) {
        let chunk = payload?.dataWithoutCopying ?? data.payload
        switch session.arrival(offset: data.offset, count: chunk.count) {
        case .duplicate:
            streamCountersStorage.duplicateBytesDropped += UInt64(chunk.count)
            return
        case .violation(let reason):
            violate(session, HandoffError(.streamProtocolViolation, reason, activityType: session.activityType))
        case .deliver(let start):
            streamCountersStorage.duplicateBytesDropped += UInt64(start)
            let fresh = start == 0 ? chunk : chunk.subdata(in: chunk.startIndex + start..<chunk.endIndex)
            metrics.streamed(in: fresh.count)
            session.creditOutstanding -= 1
            session.unconsumed += 1
            session.receivedOffset += UInt64(fresh.count)
            session.bytesArrived += UInt64(fresh.count)
            session.lastProgress = .now
            if data.totalLength > 0 { session.input.counter.setTotal(data.totalLength) }
            session.incoming.yield(.data(fresh))
        }
    }

    private func receive(_ end: WireStreamEnd, on session: StreamSession) {
        guard session.reads else {
            violate(session, HandoffError(.streamProtocolViolation, "an end arrived on a direction the open excluded", activityType: session.activityType))
            return
        }
        if !session.endReceived {
            var checksum: UInt32?
            if end.checksumAlgorithm == .crc32C, end.checksum.count == 4 {
                checksum = end.checksum.reduce(0) { $0 << 8 | UInt32($1) }
            }
            session.endReceived = true
            session.incoming.yield(.end(total: end.totalLength, checksum: checksum))
            session.incoming.finish()
        }
        // Acknowledged (again, for an end sent again after a resume): the writer may forget it.
        sendStreamMessage(session, .credit(acknowledgement(of: session)))
        removeIfDone(session)
    }

    private func acknowledgement(of session: StreamSession, chunks: Int = 0) -> WireStreamCredit {
        var credit = WireStreamCredit()
        credit.chunks = UInt32(chunks)
        credit.acknowledgedOffset = session.receivedOffset
        credit.endReceived = session.reads && session.endReceived
        return credit
    }

    /// The originator's side of an open: checks the activity and the limits, answers, and hands
    /// the pair to the delegate.
    private func acceptStreams(_ open: WireStreamOpen, route: StreamRoute, owner: String) {
        func refuse(_ error: HandoffError) {
            var frame = WireStreamFrame()
            frame.streamID = route.id
            frame.error = error.wire
            sendFrame(frame, to: route.peer, payload: nil)
        }
        guard streamRoutes[route] == nil else { return }  // the same open again
        guard WireLimits.fits(activityID: open.activityID, activityType: "") else {
            refuse(WireLimits.oversizedIdentifiers(activityID: open.activityID, activityType: ""))
            return
        }
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
        if case .UNRECOGNIZED(let value) = open.direction {
            refuse(HandoffError(.malformedMessage, "unknown stream direction \(value)", activityType: activity.activityType))
            return
        }
        var live = streams.values.filter { $0.failure == nil }
        let fromPeer = live.count { $0.owner == owner }
        if live.count >= configuration.maxStreams, fromPeer < configuration.maxStreamsPerPeer,
           evictStalledStream(because: "\(info.name) reached its limit of \(configuration.maxStreams) stream pairs and a new one was opened") {
            live = streams.values.filter { $0.failure == nil }
        }
        if live.count >= configuration.maxStreams || fromPeer >= configuration.maxStreamsPerPeer {
            let (scope, limit) = live.count >= configuration.maxStreams
                ? ("node", configuration.maxStreams) : ("peer", configuration.maxStreamsPerPeer)
            streamCountersStorage.refusedOverLimit += 1
            if streamCountersStorage.refusedOverLimit.nonzeroBitCount == 1 {  // 1, 2, 4, 8…: logged, not flooded
                logger.warning("refused to open streams for \(activity.activityType): \(scope == "node" ? "the node has \(live.count) pairs open" : "peer \(owner) has \(fromPeer) pairs open"), its limit (\(streamCountersStorage.refusedOverLimit) refused so far)")
            }
            var error = HandoffError(.tooManyStreams, scope == "node"
                ? "\(info.name) already has \(live.count) stream pairs open, its limit"
                : "\(info.name) already has \(fromPeer) stream pairs open with this peer, its limit per peer",
                activityType: activity.activityType).wire
            error.details["scope"] = scope
            error.details["limit"] = "\(limit)"
            var frame = WireStreamFrame()
            frame.streamID = route.id
            frame.error = error
            sendFrame(frame, to: route.peer, payload: nil)
            return
        }
        let session = makeSession(
            route: route, isContinuer: false, activityID: activity.id, activityType: activity.activityType,
            direction: open.direction, owner: owner, peerChunkSize: Self.chunkSize(announced: open.chunkSize))
        session.sendCredit = Int(open.window)
        session.resumeToken = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        if open.expectedLength > 0 { session.input.counter.setTotal(open.expectedLength) }
        var answer = WireStreamOpen()
        answer.activityID = activity.id
        answer.direction = open.direction
        answer.window = UInt32(configuration.streamWindow)
        answer.chunkSize = UInt32(configuration.streamChunkSize)
        answer.resumeToken = session.resumeToken
        sendStreamMessage(session, .open(answer))
        publishStreamEvent(.streamOpened, session)
        let pair = session.streams
        spawn { await delegate.userActivity(activity, didReceive: pair) }
    }

    /// The peer broke the stream's rules: it is told, and the pair is over here.
    private func violate(_ session: StreamSession, _ error: HandoffError) {
        streamCountersStorage.protocolViolations += 1
        logger.warning("stream \(session.route.id) with \(session.owner): \(error.message)")
        sendStreamMessage(session, .error(error.wire))
        session.fail(error)
    }

    // MARK: Resuming

    /// The originator's side of a resume: finds the pair by id and token (the new connection has a
    /// new routing id), moves it there, answers with what it has, and sends again what the peer lacks.
    private func resumeAsOriginator(_ resume: WireStreamResume, route: StreamRoute) {
        guard let session = streams.values.first(where: {
            !$0.isContinuer && $0.route.id == route.id && $0.failure == nil && !$0.resumeToken.isEmpty && $0.resumeToken == resume.resumeToken
        }) else {
            var frame = WireStreamFrame()
            frame.streamID = route.id
            frame.error = HandoffError(.peerLost, "\(info.name) has no stream pair \(route.id) to resume: it ended, or its resume window (\(configuration.streamResumeWindow)) passed").wire
            sendFrame(frame, to: route.peer, payload: nil)
            return
        }
        if session.route != route {
            if streamRoutes[session.route] == session.key { streamRoutes[session.route] = nil }
            session.route = route
            streamRoutes[route] = session.key
        }
        if session.interruptedSince != nil {
            logger.info("streams \(route.id) resumed by the continuing node: it had \(resume.receivedOffset) bytes, this node \(session.receivedOffset)")
        }
        session.interruptedSince = nil
        session.lastHeard = .now
        var answer = WireStreamResume()
        answer.resumeToken = session.resumeToken
        answer.receivedOffset = session.receivedOffset
        answer.window = UInt32(session.resumeGrant())
        answer.endReceived = session.reads && session.endReceived
        sendStreamMessage(session, .resume(answer))
        applyResume(resume, to: session)
    }

    /// Sends again, from what the peer says it has, what this side had written beyond it.
    private func applyResume(_ resume: WireStreamResume, to session: StreamSession) {
        session.resumes += 1
        streamCountersStorage.resumed += 1
        session.rewind(to: resume.receivedOffset, credit: Int(resume.window), endReceived: resume.endReceived)
        pump(session)
        removeIfDone(session)
    }

    /// The continuing side asks the originator to pick the pair up again, with what it has.
    private func sendResume(_ session: StreamSession, now: ContinuousClock.Instant) {
        var resume = WireStreamResume()
        resume.resumeToken = session.resumeToken
        resume.receivedOffset = session.receivedOffset
        resume.window = UInt32(session.resumeGrant())
        resume.endReceived = session.reads && session.endReceived
        session.lastResumeSent = now
        if case .dealer(let endpoint) = session.route.peer, clients[endpoint] == nil {
            // The client was closed (pruned, or dropped): connect again.
            do { _ = try client(for: endpoint, serverKey: session.originKey) } catch {
                logger.debug("streams \(session.route.id): cannot reconnect to \(endpoint): \(error)")
                return
            }
        }
        sendStreamMessage(session, .resume(resume))
    }

    /// Marks the pairs with an originator whose connection dropped as interrupted: they resume when
    /// it is back (the DEALER reconnects by itself).
    func interruptStreams(to endpoint: String) {
        for session in streams.values where session.route.peer == .dealer(endpoint) && session.failure == nil {
            if session.openWaiter != nil {
                session.fail(HandoffError(.connectionUnavailable, "the originator at \(endpoint) disconnected before answering the open", activityType: session.activityType))
            } else if session.interruptedSince == nil {
                logger.info("streams \(session.route.id): the connection to \(endpoint) dropped; resuming when it is back")
                session.interruptedSince = .now
            }
        }
    }

    // MARK: Frames out

    private func sendFrame(_ frame: WireStreamFrame, to peer: StreamRoute.Peer, payload: Frame?) {
        sequence += 1
        let bytes: [UInt8] = try! WireEnvelope(body: .streamFrame(frame), sender: info.wire, sequence: sequence).serializedBytes()
        var interrupted = false
        do {
            switch peer {
            case .router(let identity):
                // ROUTER drops frames for a peer that is gone; a resume sends them again.
                _ = try server.trySend(identity, more: true)
                _ = try server.trySend(bytes, more: payload != nil)
                if let payload { _ = try server.trySend(payload) }
                metrics.sent(on: .continuationServer, bytes: identity.count + bytes.count + (payload?.count ?? 0))
            case .dealer(let endpoint):
                guard let client = clients[endpoint] else { return }
                // With ZMQ_IMMEDIATE the DEALER refuses while it has no connection.
                interrupted = try !client.socket.trySend(bytes, more: payload != nil)
                if !interrupted, let payload { _ = try client.socket.trySend(payload) }
                if !interrupted { metrics.sent(on: .continuationClient, bytes: bytes.count + (payload?.count ?? 0)) }
            }
        } catch {
            logger.debug("could not send on stream \(frame.streamID): \(error)")
            interrupted = true
        }
        if !interrupted, let payload { metrics.streamed(out: payload.count) }
        if interrupted, let key = streamRoutes[StreamRoute(peer: peer, id: frame.streamID)], let session = streams[key],
           session.failure == nil, session.interruptedSince == nil, session.openWaiter == nil {
            session.interruptedSince = .now
        }
    }

    private func sendStreamMessage(_ session: StreamSession, _ kind: WireStreamFrame.OneOf_Kind, payload: Frame? = nil) {
        var frame = WireStreamFrame()
        frame.streamID = session.route.id
        frame.kind = kind
        session.lastSent = .now
        sendFrame(frame, to: session.route.peer, payload: payload)
    }

    private func transmit(_ chunk: StreamSession.SentChunk, on session: StreamSession) {
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
    private func pump(_ session: StreamSession) {
        guard session.failure == nil else { return }
        while session.sendCredit > 0, session.interruptedSince == nil,
              session.retained.count < Self.maxUnacknowledgedChunks, let chunk = session.resend.popFirst() {
            transmit(chunk, on: session)
            session.bytesResent += UInt64(chunk.frame.count)
            streamCountersStorage.bytesResent += UInt64(chunk.frame.count)
        }
        if session.resend.isEmpty, session.endNeedsSending, session.interruptedSince == nil, let end = session.end {
            session.endNeedsSending = false
            sendStreamMessage(session, .end(end))
        }
        if writerMayProceed(session) { session.wakeWriter() }
    }

    private func writerMayProceed(_ session: StreamSession) -> Bool {
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
    func cancelStream(_ key: StreamKey, reason: String) {
        guard let session = streams[key], session.failure == nil else { return }
        var cancel = WireStreamCancel()
        cancel.reason = reason
        sendStreamMessage(session, .cancel(cancel))
        session.fail(HandoffError(.streamCancelled, "the stream was cancelled here: \(reason)", activityType: session.activityType))
    }

    private func removeIfDone(_ session: StreamSession) {
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

    // MARK: Liveness

    /// Called on every tick: keep-alives for quiet pairs, resumes for interrupted ones, failure for
    /// peers silent past the resume window, cleanup.
    func superviseStreams(now: ContinuousClock.Instant) {
        relieveStreamPressure()
        for session in streams.values {
            if let failedAt = session.failedAt {
                if !session.failureReported {
                    session.failureReported = true
                    publishStreamEvent(.streamFailed, session, detail: session.failure.map { "\($0)" } ?? "")
                }
                // Kept a while so that late frames for it are dropped quietly.
                if now - failedAt > .seconds(60) { forgetSession(session) }
                continue
            }
            guard session.openWaiter == nil else { continue }
            if (session.bytesSent, session.bytesArrived) != session.reported {
                publishStreamEvent(.streamProgress, session)
            }
            if session.interruptedSince == nil, now - session.lastHeard > configuration.streamIdleTimeout {
                logger.info("streams \(session.route.id): nothing heard from \(session.owner) for \(configuration.streamIdleTimeout); waiting up to \(configuration.streamResumeWindow) for it to resume")
                session.interruptedSince = now
            }
            if let since = session.interruptedSince {
                if now - since > configuration.streamResumeWindow {
                    expireInterrupted(session)
                } else if session.isContinuer, session.lastResumeSent.map({ now - $0 >= .seconds(1) }) ?? true {
                    sendResume(session, now: now)
                }
            } else if now - session.lastSent > .seconds(1) {
                sendStreamMessage(session, .credit(acknowledgement(of: session)))
            }
        }
    }

    private func expireInterrupted(_ session: StreamSession) {
        // Everything was delivered both ways and only the last acknowledgement is missing: done.
        if session.endReceived, session.end != nil, session.resend.isEmpty, session.retained.isEmpty {
            session.endAcknowledged = true
            removeIfDone(session)
            return
        }
        streamCountersStorage.lost += 1
        let silence = ContinuousClock.now - session.lastHeard
        let peer = session.isContinuer ? "the originator" : "the continuing node \(session.owner)"
        session.fail(HandoffError(.peerLost, "nothing heard from \(peer) for \(silence.seconds.formatted(.number.precision(.fractionLength(1)))) s, and it did not resume within the resume window (\(configuration.streamResumeWindow)): its process died or the network is down; \(session.receivedOffset) bytes had arrived", activityType: session.activityType))
    }
}

/// Which halves of a stream pair the continuing node opens.
public enum StreamDirection: Sendable, Hashable, CustomStringConvertible {
    /// Both ways (the usual case).
    case both
    /// Only from the originator to this node: the output is closed from the start.
    case fromOriginator
    /// Only from this node to the originator: the input is empty and ended from the start.
    case toOriginator

    var wire: WireStreamDirection {
        switch self {
        case .both: .unspecified
        case .fromOriginator: .originToContinuer
        case .toOriginator: .continuerToOrigin
        }
    }

    public var description: String {
        switch self {
        case .both: "both ways"
        case .fromOriginator: "from the originator only"
        case .toOriginator: "to the originator only"
        }
    }
}

// MARK: Pressure

extension Node {
    /// Something that holds stream work the node cannot start yet (a plugin runtime's calls waiting
    /// for a worker): asked on every tick how many wait.
    func addStreamPressureProbe(_ probe: @escaping @Sendable () -> Int) {
        streamPressureProbes.append(probe)
    }

    /// Ends the pair that has gone longest without progress (at least ``Configuration-swift.struct/streamStallGrace``),
    /// from the peer holding the most pairs, to free what it holds: its slot, its buffers, the
    /// plugin workers blocked on it. Only pairs peers opened here (this node the originator) are
    /// chosen. Returns whether one was.
    @discardableResult
    func evictStalledStream(because reason: String) -> Bool {
        let now = ContinuousClock.now
        let live = streams.values.filter { $0.failure == nil && !$0.isContinuer }
        var held: [String: Int] = [:]
        for session in live { held[session.owner, default: 0] += 1 }
        let stalled = live.filter { $0.waitsOnPeer && now - $0.lastProgress >= configuration.streamStallGrace }
        guard let victim = stalled.min(by: { a, b in
            let (heldA, heldB) = (held[a.owner]!, held[b.owner]!)
            return heldA != heldB ? heldA > heldB : a.lastProgress < b.lastProgress
        }) else { return false }
        streamCountersStorage.evicted += 1
        let idle = (now - victim.lastProgress).seconds.formatted(.number.precision(.fractionLength(1)))
        if streamCountersStorage.evicted.nonzeroBitCount == 1 {  // 1, 2, 4, 8…: logged, not flooded
            logger.warning("ended streams \(victim.route.id) of \(victim.owner) (no progress for \(idle) s): \(reason) (\(streamCountersStorage.evicted) ended so far)")
        }
        let error = HandoffError(.tooManyStreams, "\(reason); this pair made no progress for \(idle) s and was ended to make room", activityType: victim.activityType)
        var wire = error.wire
        wire.details["scope"] = "evicted"
        sendStreamMessage(victim, .error(wire))
        victim.fail(error)
        return true
    }

    /// On every tick: while stream work waits for resources held by stalled pairs, end one stalled
    /// pair per waiting piece of work.
    func relieveStreamPressure() {
        let waiting = streamPressureProbes.reduce(0) { $0 + $1() }
        guard waiting > 0 else { return }
        for _ in 0..<waiting {
            guard evictStalledStream(because: "stream work on \(info.name) waits for plugin workers that stalled pairs hold") else { return }
        }
    }
}
