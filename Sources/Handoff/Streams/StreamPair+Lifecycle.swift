import Foundation
import HandoffWire

// A stream pair's life: the open and its answer, frames from the peer, interruption, resume,
// keep-alives and loss (stream.proto, steps 1, 4 and 5).
extension StreamPair {
    // MARK: Opening

    /// The continuing side sends its open and waits for the answer, at most `timeout` (the node's
    /// continue timeout): ``expireOpen(now:unanswered:)`` fails it after that.
    mutating func open(_ request: WireStreamOpen, now: ContinuousClock.Instant, answerWithin timeout: Duration) -> [Action] {
        isOpening = true
        openAnswerDue = now + timeout
        return [send(.open(request), now: now)]
    }

    /// The originator accepted `open` and answers with `answer` (its window, chunk size, and the
    /// resume token it drew).
    mutating func accept(_ open: WireStreamOpen, answer: WireStreamOpen, now: ContinuousClock.Instant) -> [Action] {
        sendCredit = Int(open.window)
        peerChecksum = StreamChecksum.announced(open.checksumAlgorithm)
        resumeToken = answer.resumeToken
        if let refusal = unverifiableWriter() { return fail(refusal, telling: .error(refusal.wire), now: now) }
        var actions: [Action] = []
        if open.expectedLength > 0 { actions.append(.expectLength(open.expectedLength)) }
        actions.append(send(.open(answer), now: now))
        return actions
    }

    /// On a tick: an open still unanswered at its due time fails with `unanswered`
    /// (``StreamOpenRequest/unanswered(endpoint:timeout:activityType:)``); before it, or answered, nothing.
    mutating func expireOpen(now: ContinuousClock.Instant, unanswered: @autoclosure () -> HandoffError) -> [Action] {
        guard isOpening, let due = openAnswerDue, now >= due else { return [] }
        return fail(unanswered(), now: now)
    }

    /// With verified ends required (``requiresVerifiedEnd``), a peer that announces it will end
    /// what it writes to this side in an algorithm this node does not know is refused as the pair
    /// opens, before any byte: its end could not be verified.
    private func unverifiableWriter() -> HandoffError? {
        guard requiresVerifiedEnd, reads, peerChecksum == nil else { return nil }
        return HandoffError(
            .streamChecksumMismatch, "\(peerName) announced a checksum algorithm this node does not know: this node requires every stream's bytes verified",
            activityType: activityType)
    }

    /// A chunk size announced in a StreamOpen; 0 means the contract's default.
    static func chunkSize(announced: UInt32) -> Int {
        announced == 0 ? 256 * 1024 : Int(announced)
    }

    private mutating func openAnswered(_ answer: WireStreamOpen, now: ContinuousClock.Instant) -> [Action] {
        guard isOpening else { return [] }
        isOpening = false
        guard answer.direction == direction else {
            return violate("the originator answered an open of direction \(direction) with direction \(answer.direction)", now: now)
        }
        sendCredit = Int(answer.window)
        peerChunkSize = Self.chunkSize(announced: answer.chunkSize)
        peerChecksum = StreamChecksum.announced(answer.checksumAlgorithm)
        resumeToken = answer.resumeToken
        if let refusal = unverifiableWriter() { return fail(refusal, telling: .error(refusal.wire), now: now) }
        var actions: [Action] = []
        if answer.expectedLength > 0 { actions.append(.expectLength(answer.expectedLength)) }
        actions.append(.opened(answer))
        return actions
    }

    // MARK: Frames in

    /// A frame from the peer on the pair's route (an open or a resume that starts a pair, or moves
    /// it, is the node's to route first: ``accept(_:answer:now:)``, ``resumeRequested(_:now:)``).
    /// `chunk`: a data frame's bytes.
    mutating func received(_ kind: WireStreamFrame.OneOf_Kind, chunk: Data? = nil, now: ContinuousClock.Instant) -> [Action] {
        guard failure == nil else { return [] }
        lastHeard = now
        switch kind {
        case .open(let answer):
            return openAnswered(answer, now: now)
        case .data(let data):
            return dataArrived(data, chunk: chunk ?? data.payload, now: now)
        case .credit(let credit):
            return creditArrived(credit, now: now)
        case .end(let end):
            return endArrived(end, now: now)
        case .resume(let resume):
            // The originator's answer to this side's resume.
            guard isContinuer else { return [] }
            let interrupted = interruptedSince
            interruptedSince = nil
            lastResumeSent = nil
            return applyResume(resume, interruptedSince: interrupted, now: now)
        case .cancel(let cancel):
            return fail(HandoffError(.streamCancelled, "the other side cancelled the stream: \(cancel.reason)", activityType: activityType), now: now)
        case .error(let error):
            return fail(HandoffError(wire: error, activityType: activityType), now: now)
        }
    }

    // MARK: Resuming

    /// The originator's side of a resume (arrived on the pair's new route): it answers with what it
    /// has and sends again what the peer lacks.
    mutating func resumeRequested(_ resume: WireStreamResume, now: ContinuousClock.Instant) -> [Action] {
        guard failure == nil else { return [] }
        let interrupted = interruptedSince
        interruptedSince = nil
        lastHeard = now
        let answer = resumeMessage()
        return [send(.resume(answer), now: now)] + applyResume(resume, interruptedSince: interrupted, now: now)
    }

    /// What this side has, for a resume or its answer; grants the window less what the reader holds.
    private mutating func resumeMessage() -> WireStreamResume {
        var message = WireStreamResume()
        message.resumeToken = resumeToken
        message.receivedOffset = receivedOffset
        message.window = UInt32(resumeGrant())
        message.endReceived = reads && endReceived
        return message
    }

    /// Sends again, from what the peer says it has, what this side had written beyond it.
    private mutating func applyResume(_ resume: WireStreamResume, interruptedSince: ContinuousClock.Instant?, now: ContinuousClock.Instant) -> [Action] {
        resumes += 1
        if let interruptedSince {
            // The time the pair was interrupted is the resume window's to judge, not the stall
            // timeout's. The wait while connected, before and after, still counts.
            excusePeer(since: interruptedSince, now: now)
        }
        rewind(to: resume.receivedOffset, credit: Int(resume.window), endReceived: resume.endReceived, now: now)
        return [.record(.resumed(peerHad: resume.receivedOffset, wasInterrupted: interruptedSince != nil))] + pump(now: now) + completion()
    }

    // MARK: Interruption and loss

    /// The transport could not take a frame for the peer (no connection): the pair is interrupted
    /// and waits for a resume, unless its open is still unanswered.
    mutating func transportRefused(now: ContinuousClock.Instant) {
        if interruptedSince == nil, !isOpening, failure == nil { interruptedSince = now }
    }

    /// The connection to the originator dropped (continuing side): an open still unanswered fails
    /// with `unanswered`, an open pair waits for the connection to come back and resumes.
    /// Returns whether the pair became interrupted now.
    mutating func connectionDropped(failingOpenWith unanswered: HandoffError, now: ContinuousClock.Instant) -> (actions: [Action], interruptedNow: Bool) {
        guard failure == nil else { return ([], false) }
        if isOpening { return (fail(unanswered, now: now), false) }
        guard interruptedSince == nil else { return ([], false) }
        interruptedSince = now
        return ([], true)
    }

    /// The connection to the originator is back (continuing side): an interrupted pair asks to
    /// resume now. Its resumes while the connection was down were refused by the transport (the
    /// DEALER queues nothing for a peer it is not connected to), and the next came at its resume
    /// interval, up to a second and a tick later: a pair whose window ended meanwhile failed as
    /// peer lost with its connection back, though its peer was there (seed 988593252).
    mutating func connectionReturned(now: ContinuousClock.Instant) -> [Action] {
        guard failure == nil, isContinuer, !isOpening, interruptedSince != nil else { return [] }
        return [sendResume(now: now)]
    }

    /// A resume (continuing side): what this side has, asking the originator for the rest.
    private mutating func sendResume(now: ContinuousClock.Instant) -> Action {
        lastResumeSent = now
        return send(.resume(resumeMessage()), now: now)
    }

    /// The peer is known to be gone (its endpoint refuses connections): the pair fails with `error`.
    mutating func peerGone(_ error: HandoffError, now: ContinuousClock.Instant) -> [Action] {
        guard failure == nil else { return [] }
        return [.record(.lost)] + fail(error, now: now)
    }

    /// A gap between two ticks past which this side is taken to have been paused (the node ticks
    /// at least every 250 ms).
    static let pausedAfter = Duration.seconds(1)

    /// The time from `start` to `now` was not the peer's to make progress in (the pair was
    /// interrupted, or this side did not run): the peer's turn moves on by it.
    private mutating func excusePeer(since start: ContinuousClock.Instant, now: ContinuousClock.Instant) {
        lastOwnStep = min(now, peersTurnSince + (now - start))
    }

    /// This side did not run from `start` to `now` (its process stopped, its host slept, its loop
    /// ran seconds late under load): it read nothing meanwhile, so that time is no silence of the
    /// peer's, and no time of the resume window's either. Without this, a node whose loop ran two
    /// seconds late judged a peer silent whose messages sat unread in its own socket (a one-loop
    /// test pass, both ends of a slow stream in one process), and the peer's resume came too late.
    private mutating func excuseSilence(since start: ContinuousClock.Instant, now: ContinuousClock.Instant) {
        silenceCountsFrom = min(now, silentSince + (now - start))
        if let since = interruptedSince { interruptedSince = min(now, since + (now - start)) }
    }

    /// The application's reader has taken `bytes` in all (the node reads its counter on each tick):
    /// taking more is this side's step, after which any wait is the peer's.
    mutating func readerTook(_ bytes: UInt64, now: ContinuousClock.Instant) {
        guard bytes != readerTaken else { return }
        readerTaken = bytes
        lastOwnStep = now
    }

    /// On every tick: a keep-alive for a quiet pair, a resume for an interrupted one (continuing
    /// side), loss for a peer silent past the resume window, and giving up on a peer that is heard
    /// but made no progress for the stall timeout (``StreamLiveness``). `writerWaiting`: this
    /// side's writer is blocked on credit.
    mutating func tick(now: ContinuousClock.Instant, limits: StreamLiveness.Limits, writerWaiting: Bool = false) -> [Action] {
        guard failure == nil, !isOpening else { return [] }
        if let last = lastTicked, now - last > Self.pausedAfter {
            // This side did not run for that long, as for an interruption (it may have heard
            // nothing of the peer meanwhile, or all of it at once).
            excusePeer(since: last, now: now)
            excuseSilence(since: last, now: now)
        }
        lastTicked = now
        let decision = StreamLiveness.decide(liveness(writerWaiting: writerWaiting), now: now, limits: limits)
        var actions: [Action] = []
        if decision.interruptsNow {
            interruptedSince = now
            actions.append(.record(.interruptedBySilence))
        }
        switch decision.action {
        case .nothing:
            break
        case .keepAlive:
            actions.append(send(.credit(acknowledgement()), now: now))
        case .resume:
            actions.append(sendResume(now: now))
        case .expire:
            actions += expire(now: now, resumeWindow: limits.resumeWindow)
        case .giveUp:
            actions += giveUp(now: now, stallTimeout: limits.stallTimeout ?? .zero, writerWaiting: writerWaiting)
        }
        return actions
    }

    private mutating func expire(now: ContinuousClock.Instant, resumeWindow: Duration) -> [Action] {
        // Everything was delivered both ways and only the last acknowledgement is missing: done.
        if endReceived, end != nil, resend.isEmpty, retained.isEmpty {
            endAcknowledged = true
            return completion()
        }
        let silence = (now - lastHeard).seconds.formatted(.number.precision(.fractionLength(1)))
        let error = HandoffError(.peerLost, "nothing heard from \(peerName) for \(silence) s, and it did not resume within the resume window (\(resumeWindow)): its process died or the network is down; \(receivedOffset) bytes had arrived", activityType: activityType)
        return [.record(.lost)] + fail(error, now: now)
    }

    /// The peer is heard but left the pair waiting past the stall timeout: it is told (`error`
    /// REMOTE_APPLICATION_TIMED_OUT, details["scope"] = "stalled"), and the pair is over.
    private mutating func giveUp(now: ContinuousClock.Instant, stallTimeout: Duration, writerWaiting: Bool) -> [Action] {
        let waited = (now - peersTurnSince).seconds.formatted(.number.precision(.fractionLength(1)))
        let (sentNothing, tookNothing) = (readerWaitsOnPeer, writerWaitsOnPeer(writerWaiting: writerWaiting))
        func what(_ written: String) -> String {
            [sentNothing ? "sent nothing new" : nil, tookNothing ? "took nothing of what \(written)" : nil]
                .compactMap { $0 }.joined(separator: " and ")
        }
        let error = HandoffError(
            .remoteApplicationTimedOut,
            "\(peerName) \(what("was written to it")) for \(waited) s while it stayed connected, past the stall timeout (\(stallTimeout)): gave up; \(receivedOffset) bytes had arrived, \(bytesSent) were sent",
            activityType: activityType, details: ["scope": "stalled"])
        // The peer reads the notice from its own side.
        var wire = HandoffError(
            .remoteApplicationTimedOut,
            "the other side gave up on the stream after \(waited) s in which this side \(what("it wrote")) (its stall timeout, \(stallTimeout))",
            activityType: activityType).wire
        wire.details["scope"] = "stalled"
        return [.record(.stalled)] + fail(error, telling: .error(wire), now: now)
    }
}
