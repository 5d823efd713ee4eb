import DequeModule
import Foundation
import HandoffExecutor
import HandoffWire
import Logging
import SwiftProtobuf
import ZeroMQ

extension Node {
    /// The stream pairs open on this node right now (either side), e.g. to show their progress.
    public var openStreams: [ContinuationStreams] {
        streams.live.map(\.streams)
    }

    /// What the node's stream pairs did so far: resumes, bytes sent twice, refusals.
    public var streamCounters: StreamCounters { observability.streamCounters }

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
        /// Pairs this node gave up on because the peer made no progress past
        /// ``Configuration-swift.struct/streamStallTimeout``.
        public var stalled = 0
        /// Pairs cancelled because this node's application stopped reading before the end (its
        /// iteration left, or its reading task was cancelled).
        public var readersStopped = 0
        /// Pairs cancelled because this node's application let go of them leaving bytes written
        /// without an end, or bytes unread (an untouched output ends empty, and is not counted).
        public var letGo = 0
        /// Stream ends held to their length only: the peer's end carried no checksum, or one in
        /// another algorithm than its open announced (a third-party writer; Handoff nodes never send one).
        public var endsNotVerified = 0

        public init() {}
    }

    // MARK: Opening (continuing side)

    /// Opens a pair of continuation streams with a continued activity's originator — Apple's
    /// `getContinuationStreams`. The originator's delegate receives its own pair in
    /// ``UserActivityDelegate/userActivity(_:didReceive:)``.
    ///
    /// The open waits for the originator's answer for ``Configuration-swift.struct/continueTimeout``;
    /// after that, nothing bounds the pair's duration: it lives while it makes progress or its peer
    /// answers keep-alives (up to ``Configuration-swift.struct/streamStallTimeout`` without progress,
    /// when set), and survives a broken connection that comes back within
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
        try await openStreams(for: activity, direction: direction, document: false)
    }

    /// ``openStreams(for:direction:)``, or (`document`) the originator's node sending the
    /// activity's document (stream.proto, `StreamOpen.document`).
    func openStreams(
        for activity: ContinuedActivity, direction: StreamDirection, document: Bool
    ) async throws(HandoffError) -> ContinuationStreams {
        guard lifecycle.runState == .running else {
            throw HandoffError(.notRunning, "start the node with run() before opening streams", activityType: activity.activityType)
        }
        try StreamOpenRequest.check(
            supportsStreams: activity.supportsContinuationStreams, document: document, livePairs: streams.liveCount,
            maxStreams: own.configuration.maxStreams, activityType: activity.activityType)
        let endpoint = activity.continueEndpoint
        _ = try await connectedClient(endpoint, serverKey: activity.origin.publicKey, activityType: activity.activityType)
        let session = makeSession(
            route: StreamRoute(peer: .dealer(endpoint), id: streams.newRouteID()), isContinuer: true,
            activityID: activity.id, activityType: activity.activityType, direction: direction.wire,
            owner: activity.origin.id, peerChunkSize: own.configuration.streamChunkSize)
        session.originKey = activity.origin.publicKey
        session.peer = activity.origin.wire
        session.traceID = activity.traceID  // its open carries the continue's trace

        let request = StreamOpenRequest.open(
            activityID: activity.id, direction: direction.wire, window: own.configuration.streamWindow,
            chunkSize: own.configuration.streamChunkSize, checksum: own.configuration.streamChecksum.wire, document: document)
        // A loop polls for the answer rather than sleeping (EventLoops.awaitReply), as for a continue.
        let awaited = EventLoops.awaitReply(within: own.configuration.replyPolling)
        let answer: Result<WireStreamOpen, HandoffError> = await withCheckedContinuation { continuation in
            session.openWaiter = continuation
            // Unanswered, it fails on the node's tick once the continue timeout has passed (superviseStreams).
            perform(session.pair.open(request, now: .now, answerWithin: own.configuration.continueTimeout), on: session)
        }
        awaited.end()
        switch answer {
        case .success:
            own.logger.debug("streams \(session.route.id) open with \(endpoint) (\(direction))")
            publishStreamEvent(.streamOpened, session)
            return session.handOut()
        case .failure(let error):
            forgetSession(session)
            throw error
        }
    }

    func makeSession(
        route: StreamRoute, isContinuer: Bool, activityID: String, activityType: String,
        direction: WireStreamDirection, owner: String, peerChunkSize: Int
    ) -> StreamSession {
        var pair = StreamPair(
            isContinuer: isContinuer, direction: direction, peerName: isContinuer ? "the originator" : "the continuing node \(owner)",
            activityType: activityType, window: own.configuration.streamWindow, chunkSize: own.configuration.streamChunkSize,
            peerChunkSize: peerChunkSize, now: .now)
        pair.requiresVerifiedEnd = own.configuration.requireVerifiedStreamEnds
        makeRoomForAnotherPair()
        let session = StreamSession(
            node: self, key: streams.newKey(), route: route, activityID: activityID, owner: owner, pair: pair,
            checksum: own.configuration.streamChecksum)
        streams.insert(session)
        return session
    }

    func forgetSession(_ session: StreamSession) {
        streams.remove(session)
    }

    // MARK: Frames in

    /// Handles a StreamFrame from a peer (the payload, if any, is the frame after the envelope).
    /// `owner` names the peer for the per-peer limit (its CURVE key, or its node id).
    /// `traceID`: its envelope's (an open of a traced continue's activity is traced); `sender`:
    /// its envelope's sender, for the trace's hops and the pair's node events.
    func handleStreamFrame(
        _ frame: WireStreamFrame, payload: Frame?, from peer: StreamRoute.Peer, owner: String, traceID: String = "", sender: WireNodeRef? = nil
    ) {
        let route = StreamRoute(peer: peer, id: frame.streamID)
        switch (frame.kind, peer) {
        case (.open(let open), .router):
            acceptStreams(open, route: route, owner: owner, traceID: traceID, sender: sender)
            return
        case (.resume(let resume), .router):
            resumeAsOriginator(resume, route: route)
            return
        default:
            break
        }
        guard let session = streams.live(on: route), let kind = frame.kind else { return }
        perform(session.pair.received(kind, chunk: payload?.dataWithoutCopying, now: .now), on: session)
    }

    /// The originator's side of an open: checks the activity and the limits, answers, and hands
    /// the pair to the delegate.
    func acceptStreams(_ open: WireStreamOpen, route: StreamRoute, owner: String, traceID: String = "", sender: WireNodeRef? = nil) {
        func refuse(_ error: WireError) {
            var frame = WireStreamFrame()
            frame.streamID = route.id
            frame.error = error
            sendFrame(frame, to: route.peer, payload: nil)
            traceRefusedOpen(open, traceID: traceID, HandoffError(wire: error))
        }
        guard !streams.isTaken(route) else { return }  // the same open again
        let (activity, document): (UserActivity, DocumentReference?)
        switch StreamOpenCheck.check(open, in: advertiser.current, node: own.info.name) {
        case .refuse(let error):
            refuse(error.wire)
            return
        case .accept(let accepted, let sent):
            (activity, document) = (accepted, sent)
        }
        let delegate = activity.delegate  // held from the check on: the activity holds it weakly
        let (maxStreams, maxStreamsPerPeer) = (own.configuration.maxStreams, own.configuration.maxStreamsPerPeer)
        var admission = streams.admission(owner: owner, maxStreams: maxStreams, maxStreamsPerPeer: maxStreamsPerPeer)
        if StreamOpenCheck.evictionMayAdmit(admission, maxStreamsPerPeer: maxStreamsPerPeer),
           evictStalledStream(because: "\(own.info.name) reached its limit of \(maxStreams) stream pairs and a new one was opened") {
            admission = streams.admission(owner: owner, maxStreams: maxStreams, maxStreamsPerPeer: maxStreamsPerPeer)
        }
        if let refusal = StreamOpenCheck.overLimit(
            admission, node: own.info.name, owner: owner, activityType: activity.activityType, maxStreams: maxStreams, maxStreamsPerPeer: maxStreamsPerPeer
        ) {
            observability.streamCounters.refusedOverLimit += 1
            if observability.streamCounters.refusedOverLimit.nonzeroBitCount == 1 {  // 1, 2, 4, 8…: logged, not flooded
                own.logger.warning("refused to open streams for \(activity.activityType): \(refusal.logged), its limit (\(observability.streamCounters.refusedOverLimit) refused so far)")
            }
            refuse(refusal.wire)
            return
        }
        let session = makeSession(
            route: route, isContinuer: false, activityID: activity.id, activityType: activity.activityType,
            direction: open.direction, owner: owner, peerChunkSize: StreamPair.chunkSize(announced: open.chunkSize))
        let answer = StreamOpenCheck.answer(
            open, document: document, window: own.configuration.streamWindow, chunkSize: own.configuration.streamChunkSize,
            checksum: own.configuration.streamChecksum.wire, resumeToken: Data((0..<16).map { _ in UInt8.random(in: 0...255) }))
        session.peer = sender
        if admitsTrace(traceID, of: "stream open") { traceOpened(session, answer, traceID: traceID, peerName: sender?.name ?? "") }
        perform(session.pair.accept(open, answer: answer, now: .now), on: session)
        // Refused as it opened (an end it could not verify): the application never sees it.
        guard session.pair.failure == nil else { return }
        session.reading.setWriterChecksum(session.pair.peerChecksum)
        publishStreamEvent(.streamOpened, session)
        let pair = session.handOut()
        if let document {
            let key = session.key
            spawn { await Self.sendDocument(document, on: pair, key: key, node: self, activityType: activity.activityType) }
        } else if let delegate {
            spawn { await delegate.userActivity(activity, didReceive: pair) }
        }
    }
}
