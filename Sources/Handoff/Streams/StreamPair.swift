import DequeModule
import Foundation
import HandoffWire
import ZeroMQ

/// One stream pair's protocol (stream.proto), either side, as a value with no I/O: events in (a
/// frame from the peer, the application's write, end or read, the transport refusing a frame, a
/// tick), actions out (a frame to send, bytes or the end to hand the reader, the writer to wake, a
/// failure, completion). Time is passed in with every event; the only randomness, the resume
/// token, is passed in by whoever accepts the open.
///
/// The node carries the actions out for its pairs (``StreamSession`` is the shell: the waiters and
/// the reader's queue); the simulator runs the same machine over its simulated network. The rules
/// are tested on the machine alone (StreamPairTests), as quinn-proto tests QUIC's connection.
struct StreamPair {
    /// Writers never have more chunks unacknowledged than this, whatever credit a peer grants, so
    /// what a writer keeps for a resume is bounded too.
    static let maxUnacknowledgedChunks = 64

    /// Whether this side is the continuing one (it opened the pair, and resumes it).
    let isContinuer: Bool
    let direction: WireStreamDirection
    /// Who the peer is, in words, and the activity's type, for the errors the pair ends with.
    let peerName: String
    let activityType: String
    /// The originator's token for resuming the pair (empty until the open is answered).
    var resumeToken = Data()
    /// Waiting for the originator's answer to this side's open.
    var isOpening = false
    /// When the open's wait for its answer ends (``open(_:now:answerWithin:)``).
    var openAnswerDue: ContinuousClock.Instant?

    // MARK: Writing half

    /// Whether this side writes (the open did not exclude its direction).
    let writes: Bool
    /// Chunks this side may still send before the peer grants more.
    var sendCredit = 0
    /// The largest chunk the peer accepts.
    var peerChunkSize: Int
    /// Chunks sent and not yet acknowledged, kept to send again after a resume; at most the credit
    /// granted, so bounded by the peer's window. Frames are reference-counted: keeping one costs no copy.
    var retained = Deque<SentChunk>()
    /// Chunks to send again after a resume, before anything new.
    var resend = Deque<SentChunk>()
    /// The end this side wrote, kept until the peer acknowledges it.
    var end: WireStreamEnd?
    var endNeedsSending = false
    /// The peer acknowledged this side's end (or this side does not write).
    var endAcknowledged: Bool

    struct SentChunk {
        let offset: UInt64
        let frame: Frame
        let total: UInt64
    }

    // MARK: Reading half

    /// Whether this side reads.
    let reads: Bool
    /// The largest chunk this side accepts.
    let ownChunkSize: Int
    /// The window this side grants.
    let window: Int
    /// Bytes received in order.
    var receivedOffset: UInt64 = 0
    /// Chunks the peer may still send under the credit granted.
    var creditOutstanding: Int
    /// Chunks handed to the reader and not yet consumed (granted back as credit).
    var unconsumed = 0
    /// Bytes the application's reader has taken, as the node last looked (it grants credit only
    /// every few chunks, so ``unconsumed`` alone cannot say whether the reader waits for more).
    var readerTaken: UInt64 = 0
    /// The peer's end arrived (or this side does not read).
    var endReceived: Bool
    /// The checksum the peer's end is computed with, as its open announced (`nil`: an algorithm
    /// this side does not know).
    var peerChecksum: StreamChecksum? = .crc32c
    /// Whether an end this side cannot verify (no checksum, or one in another algorithm than
    /// announced) fails the pair rather than being held to its length only
    /// (``Node/Configuration/requireVerifiedStreamEnds``).
    var requiresVerifiedEnd = false
    /// The application let go of the pair before anything arrived to read
    /// (``applicationLetGo(readerTook:written:emptyEnd:now:)``): the first bytes that do cancel it.
    var abandoned = false

    // MARK: Liveness and outcome

    /// Bytes this side put on the wire, and took off it, resends included.
    var bytesSent: UInt64 = 0
    var bytesArrived: UInt64 = 0
    /// Bytes sent again after resumes.
    var bytesResent: UInt64 = 0
    var resumes = 0
    var lastHeard: ContinuousClock.Instant
    /// The silence that the idle timeout judges starts no earlier: moved on by the time this side
    /// did not run (``pausedAfter``), in which it listened to nothing (``silentSince``).
    var silenceCountsFrom: ContinuousClock.Instant?
    /// When the pair last made progress: bytes read from the peer, or written bytes acknowledged.
    var lastProgress: ContinuousClock.Instant
    /// When this side's application last did its part (its reader took or consumed bytes, its
    /// writer wrote), moved on by the time the pair spent interrupted. A wait on the peer starts
    /// no earlier.
    var lastOwnStep: ContinuousClock.Instant
    var lastSent: ContinuousClock.Instant
    /// Since when the pair is interrupted (connection dropped, or silence), waiting for a resume.
    var interruptedSince: ContinuousClock.Instant?
    var lastResumeSent: ContinuousClock.Instant?
    /// This side's last tick: a gap far longer than the node's tick interval means this side did not
    /// run (its process stopped, its host slept), which is not the peer's time.
    var lastTicked: ContinuousClock.Instant?
    private(set) var failure: HandoffError?
    private(set) var failedAt: ContinuousClock.Instant?
    /// `.completed` was announced (it is, once).
    private var completionAnnounced = false

    /// What the node (or the simulator) does for the pair.
    enum Action {
        /// Put this frame on the wire to the peer (a chunk's bytes travel as `payload`).
        case send(WireStreamFrame.OneOf_Kind, payload: Frame?)
        /// Hand these bytes to the reader, in order.
        case deliver(Data)
        /// The peer's end: the reader's iteration ends once it verified length and checksum.
        case deliverEnd(total: UInt64, checksum: StreamEndChecksum?)
        /// The peer said how many bytes it will send (for the reader's progress).
        case expectLength(UInt64)
        /// The originator accepted this side's open: the opener goes on.
        case opened(WireStreamOpen)
        /// A writer waiting for credit (or the resume) may go on.
        case wakeWriter
        /// The pair failed: the reader's iteration throws, a waiting writer and opener wake to it.
        case failed(HandoffError)
        /// Both halves are complete: the pair can be forgotten.
        case completed
        /// Something to count or log.
        case record(Record)
    }

    /// What the pair did that the node counts (``Node/StreamCounters``) or logs.
    enum Record: Equatable {
        /// Bytes that arrived again after a resume and were dropped.
        case duplicateBytesDropped(Int)
        /// Bytes sent again after a resume.
        case bytesResent(Int)
        /// A chunk of this many bytes beyond a gap, dropped while this side's resume is unanswered
        /// (the peer sends it again from what this side has).
        case droppedAheadOfResume(Int)
        /// The peer's end, counting `total` bytes, beyond a gap while this side's resume is
        /// unanswered: dropped likewise (it comes again after the bytes that are missing).
        case endDroppedAheadOfResume(total: UInt64)
        /// The pair was picked up again; the peer had `peerHad` bytes. `wasInterrupted`: this side
        /// had noticed the interruption (the resume is news worth a log line).
        case resumed(peerHad: UInt64, wasInterrupted: Bool)
        /// The peer broke the stream's rules (the pair failed with this error, and the peer was told).
        case violation(HandoffError)
        /// Nothing was heard from the peer for the idle timeout: the pair waits for a resume.
        case interruptedBySilence
        /// The pair failed because its peer is gone (silent past the resume window, or refusing).
        case lost
        /// This side gave up on a peer that made no progress for the stall timeout.
        case stalled
        /// This side's reader stopped before the end, and the pair was cancelled for it.
        case readerStopped
        /// The application let go of the pair leaving what cannot end as a stream (bytes written
        /// without an end, bytes unread), and the pair was cancelled for it.
        case letGo
        /// The peer's end carried no checksum, or one of an algorithm other than the one its open
        /// announced (`announced`, which this side computed; `nil`: one it does not know), so the
        /// bytes are held to their length only (stream.proto, ChecksumAlgorithm).
        case endNotVerified(WireChecksumAlgorithm, announced: StreamChecksum?, total: UInt64)
    }

    init(isContinuer: Bool, direction: WireStreamDirection, peerName: String, activityType: String, window: Int, chunkSize: Int, peerChunkSize: Int, now: ContinuousClock.Instant) {
        self.isContinuer = isContinuer
        self.direction = direction
        self.peerName = peerName
        self.activityType = activityType
        writes = Self.writes(direction, isContinuer: isContinuer)
        reads = Self.writes(direction, isContinuer: !isContinuer)
        endAcknowledged = !writes
        endReceived = !reads
        self.window = window
        creditOutstanding = window
        ownChunkSize = chunkSize
        self.peerChunkSize = peerChunkSize
        lastHeard = now
        lastProgress = now
        lastOwnStep = now
        lastSent = now
    }

    /// Whether the side (`isContinuer`) writes under `direction`.
    static func writes(_ direction: WireStreamDirection, isContinuer: Bool) -> Bool {
        switch direction {
        case .originToContinuer: !isContinuer
        case .continuerToOrigin: isContinuer
        default: true
        }
    }

    /// The largest chunk this side's writer sends: at most what the peer accepts.
    var writeChunkSize: Int { min(ownChunkSize, peerChunkSize) }

    /// Both halves are complete: what this side wrote was acknowledged as ended, what it reads ended.
    var isComplete: Bool { endAcknowledged && endReceived && failure == nil }

    var isLive: Bool { failure == nil }

    /// Whether the pair waits on its peer, not on this side: what it wrote awaits credit or an
    /// acknowledgement, or it reads and its reader has taken all that arrived. `writerWaiting`: this side's
    /// writer is blocked on credit (a pair whose own writer has not started, its plugin call
    /// waiting for a worker, is not waiting on its peer).
    func waitsOnPeer(writerWaiting: Bool) -> Bool {
        writerWaitsOnPeer(writerWaiting: writerWaiting) || readerWaitsOnPeer || interruptedSince != nil
    }

    /// What this side wrote awaits the peer's credit or acknowledgement.
    func writerWaitsOnPeer(writerWaiting: Bool) -> Bool {
        writes && !endAcknowledged && (sendCredit == 0 || end != nil || !retained.isEmpty && writerWaiting)
    }

    /// This side reads, and its reader took all that arrived (or holds nothing to grant back).
    var readerWaitsOnPeer: Bool {
        reads && !endReceived && (unconsumed == 0 || readerTaken >= receivedOffset)
    }

    /// Whether this side still sends keep-alives: only while a direction it takes part in is open
    /// for it (it reads one that has not ended, or writes one whose end it has not sent). Once a
    /// one-way pair's writer has sent its end, nothing more comes from it but that end again after a
    /// resume: a keep-alive then would be traffic on the direction the open excluded.
    var sendsKeepAlives: Bool {
        (reads && !endReceived) || (writes && end == nil)
    }

    /// Open, and interrupted: waiting for its peer to come back within the resume window.
    var awaitsResume: Bool { interruptedSince != nil && !isOpening }

    /// Since when it is the peer's turn: the later of the pair's last progress and this side's
    /// last step. A reader that held its bytes for a minute, or a writer that wrote nothing for
    /// one, did not leave its peer stalled for that minute.
    var peersTurnSince: ContinuousClock.Instant { max(lastProgress, lastOwnStep) }

    /// Since when the peer is silent as the idle timeout counts it: since it was last heard, less
    /// the time this side did not run.
    var silentSince: ContinuousClock.Instant { max(lastHeard, silenceCountsFrom ?? lastHeard) }

    /// What the liveness rules read of the pair (``StreamLiveness``). `writerWaiting`: this side's
    /// writer is blocked on credit.
    func liveness(writerWaiting: Bool) -> StreamLiveness.State {
        StreamLiveness.State(
            silentSince: silentSince, lastSent: lastSent, peersTurnSince: peersTurnSince, interruptedSince: interruptedSince,
            lastResumeSent: lastResumeSent, isContinuer: isContinuer, sendsKeepAlives: sendsKeepAlives,
            waitsOnPeer: waitsOnPeer(writerWaiting: writerWaiting))
    }

    /// Whether the writer may put a new chunk on the wire now (or learn that the pair failed).
    var writerMayProceed: Bool {
        failure != nil || (sendCredit > 0 && resend.isEmpty && interruptedSince == nil && retained.count < Self.maxUnacknowledgedChunks)
    }

    /// The acknowledgement this side sends (with `chunks` of new credit; 0 is a keep-alive).
    func acknowledgement(chunks: Int = 0) -> WireStreamCredit {
        var credit = WireStreamCredit()
        credit.chunks = UInt32(chunks)
        credit.acknowledgedOffset = receivedOffset
        credit.endReceived = reads && endReceived
        return credit
    }

    /// `.completed`, the first time the pair is complete.
    mutating func completion() -> [Action] {
        guard isComplete, !completionAnnounced else { return [] }
        completionAnnounced = true
        return [.completed]
    }

    // MARK: Failing

    /// Ends the pair with `error`, telling the peer with `notice` (an error or a cancel) if given.
    /// A failure is final: the first error stays, later ones change nothing.
    mutating func fail(_ error: HandoffError, telling notice: WireStreamFrame.OneOf_Kind? = nil, now: ContinuousClock.Instant) -> [Action] {
        guard failure == nil else { return [] }
        var actions: [Action] = []
        if let notice { actions.append(send(notice, now: now)) }
        failure = error
        failedAt = now
        isOpening = false
        retained.removeAll()
        resend.removeAll()
        actions.append(.failed(error))
        return actions
    }

    /// The node stops (`node`: its name): the pair fails here with `notRunning`, and the peer is
    /// told at once (its pair fails with `peerLost`) rather than left to wait out its resume window
    /// for a node that is not coming back.
    mutating func nodeStopped(node: String, now: ContinuousClock.Instant) -> [Action] {
        let notice = HandoffError(.peerLost, "\(node) shut down", activityType: activityType).wire
        return fail(HandoffError(.notRunning, "the node shut down"), telling: .error(notice), now: now)
    }

    /// The peer broke the stream's rules: it is told, and the pair is over.
    mutating func violate(_ reason: String, now: ContinuousClock.Instant) -> [Action] {
        let error = HandoffError(.streamProtocolViolation, reason, activityType: activityType)
        return [.record(.violation(error))] + fail(error, telling: .error(error.wire), now: now)
    }

    /// A frame to the peer: what was last sent is now.
    mutating func send(_ kind: WireStreamFrame.OneOf_Kind, payload: Frame? = nil, now: ContinuousClock.Instant) -> Action {
        lastSent = now
        return .send(kind, payload: payload)
    }
}
