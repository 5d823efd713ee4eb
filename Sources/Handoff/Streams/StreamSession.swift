import DequeModule
import Foundation
import HandoffWire
import ZeroMQ

/// Identifies a stream pair on its node, for the pair's whole life: the route to the peer may
/// change (a resumed pair arrives on a new connection), this does not.
struct StreamKey: Hashable, Sendable {
    let local: UInt64
}

/// Where a pair's frames go and come from: the peer and the pair's wire id.
struct StreamRoute: Hashable, Sendable {
    enum Peer: Hashable, Sendable {
        /// A continuing node, by its routing id on this node's ROUTER.
        case router([UInt8])
        /// An originator, by its continuation endpoint (this node's DEALER to it).
        case dealer(String)
    }
    let peer: Peer
    let id: UInt64
}

/// One stream pair's state on a node (either end): credit, offsets, what is kept for a resume,
/// liveness. Owned by the node actor; the protocol it keeps is the one `stream.proto` describes.
final class StreamSession {
    let key: StreamKey
    var route: StreamRoute
    /// Whether this node is the continuing side (it opened the pair, and resumes it).
    let isContinuer: Bool
    let activityID: String
    let activityType: String
    let direction: WireStreamDirection
    /// Who the peer is, for the per-peer limit: its CURVE key, or its node id without security.
    let owner: String
    /// The originator's token for resuming the pair (empty until the open is answered).
    var resumeToken = Data()
    /// The originator's CURVE key, to connect to it again for a resume (continuing side).
    var originKey: CurveKey?

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
    var creditWaiter: CheckedContinuation<Void, Never>?

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
    /// The peer's end arrived (or this side does not read).
    var endReceived: Bool

    // MARK: Liveness and outcome

    /// Bytes this node put on the wire, and took off it, for this pair, resends included.
    var bytesSent: UInt64 = 0
    var bytesArrived: UInt64 = 0
    /// Bytes sent again after resumes.
    var bytesResent: UInt64 = 0
    var resumes = 0
    /// Bytes (sent, arrived) when progress was last published.
    var reported: (sent: UInt64, received: UInt64) = (0, 0)
    var lastHeard = ContinuousClock.now
    /// When the pair last made progress: bytes read from the peer, or written bytes acknowledged.
    var lastProgress = ContinuousClock.now
    var lastSent = ContinuousClock.now
    /// Since when the pair is interrupted (connection dropped, or silence), waiting for a resume.
    var interruptedSince: ContinuousClock.Instant?
    var lastResumeSent: ContinuousClock.Instant?
    var failure: HandoffError?
    var failedAt: ContinuousClock.Instant?
    var failureReported = false
    /// The continuing side waits here for the originator's answer to its open.
    var openWaiter: CheckedContinuation<Result<WireStreamOpen, HandoffError>, Never>?

    let incoming: AsyncStream<StreamEvent>.Continuation
    let input: ContinuationInputStream
    let output: ContinuationOutputStream

    init(
        node: Node, key: StreamKey, route: StreamRoute, isContinuer: Bool, activityID: String, activityType: String,
        direction: WireStreamDirection, owner: String, window: Int, chunkSize: Int, peerChunkSize: Int
    ) {
        self.key = key
        self.route = route
        self.isContinuer = isContinuer
        self.activityID = activityID
        self.activityType = activityType
        self.direction = direction
        self.owner = owner
        writes = Self.writes(direction, isContinuer: isContinuer)
        reads = Self.writes(direction, isContinuer: !isContinuer)
        endAcknowledged = !writes
        endReceived = !reads
        self.window = window
        creditOutstanding = window
        ownChunkSize = chunkSize
        self.peerChunkSize = peerChunkSize
        let (events, continuation) = AsyncStream.makeStream(of: StreamEvent.self)
        incoming = continuation
        input = ContinuationInputStream(node: node, key: key, events: events, window: window, enabled: reads)
        output = ContinuationOutputStream(node: node, key: key, chunkSize: min(chunkSize, peerChunkSize), enabled: writes)
        if !reads {
            // The open excluded this direction: the reading half is empty and already ended.
            continuation.yield(.end(total: 0, checksum: nil))
            continuation.finish()
        }
    }

    /// Whether the side (`isContinuer`) writes under `direction`.
    static func writes(_ direction: WireStreamDirection, isContinuer: Bool) -> Bool {
        switch direction {
        case .originToContinuer: !isContinuer
        case .continuerToOrigin: isContinuer
        default: true
        }
    }

    var streams: ContinuationStreams {
        ContinuationStreams(id: route.id, activityID: activityID, input: input, output: output)
    }

    /// Both halves are complete: what this side wrote was acknowledged as ended, what it reads ended.
    var isComplete: Bool { endAcknowledged && endReceived && failure == nil }

    /// Ends the session with an error: the reader's iteration throws it, a waiting writer wakes to it.
    func fail(_ error: HandoffError) {
        guard failure == nil else { return }
        failure = error
        failedAt = .now
        retained.removeAll()
        resend.removeAll()
        incoming.yield(.failed(error))
        incoming.finish()
        wakeWriter()
        openWaiter?.resume(returning: .failure(error))
        openWaiter = nil
    }

    func wakeWriter() {
        creditWaiter?.resume()
        creditWaiter = nil
    }

    /// Whether the pair waits on its peer, not on this side: what it wrote awaits credit or an
    /// acknowledgement, or it reads and nothing is waiting to be read. A pair whose own writer has
    /// not started (its plugin call waits for a worker) is not waiting on its peer.
    var waitsOnPeer: Bool {
        let writerWaits = writes && !endAcknowledged && (sendCredit == 0 || end != nil || !retained.isEmpty && creditWaiter != nil)
        let readerWaits = reads && !endReceived && unconsumed == 0
        return writerWaits || readerWaits || interruptedSince != nil
    }

    /// Whether this side still sends keep-alives: only while a direction it takes part in is open
    /// for it (it reads one that has not ended, or writes one whose end it has not sent). Once a
    /// one-way pair's writer has sent its end, nothing more comes from it but that end again after a
    /// resume: a keep-alive then would be traffic on the direction the open excluded.
    var sendsKeepAlives: Bool {
        (reads && !endReceived) || (writes && end == nil)
    }

    /// Open, and interrupted: waiting for its peer to come back within the resume window.
    var awaitsResume: Bool { interruptedSince != nil && openWaiter == nil }

    /// What the liveness rules read of the pair (``StreamLiveness``).
    var liveness: StreamLiveness.State {
        StreamLiveness.State(
            lastHeard: lastHeard, lastSent: lastSent, interruptedSince: interruptedSince,
            lastResumeSent: lastResumeSent, isContinuer: isContinuer, sendsKeepAlives: sendsKeepAlives)
    }

    /// Whether the writer may put a new chunk on the wire now.
    var writerMayProceed: Bool {
        failure != nil || (sendCredit > 0 && resend.isEmpty && interruptedSince == nil)
    }

    // MARK: Writer bookkeeping

    /// The peer acknowledged bytes up to `offset` (and, maybe, the end): forget what it has.
    func acknowledge(upTo offset: UInt64, endReceived: Bool) {
        while let first = retained.first, first.offset + UInt64(first.frame.count) <= offset {
            retained.removeFirst()
            lastProgress = .now
        }
        if endReceived, end != nil {
            if !endAcknowledged { lastProgress = .now }
            endAcknowledged = true
            retained.removeAll()
            resend.removeAll()
            endNeedsSending = false
        }
    }

    /// After a resume: everything from the peer's `receivedOffset` on is sent again, the end too.
    func rewind(to receivedOffset: UInt64, credit: Int, endReceived: Bool) {
        acknowledge(upTo: receivedOffset, endReceived: endReceived)
        sendCredit = credit
        resend = Deque(retained.filter { $0.offset + UInt64($0.frame.count) > receivedOffset })
        retained.removeAll()
        if end != nil, !endAcknowledged { endNeedsSending = true }
    }

    // MARK: Reader bookkeeping

    /// What a chunk at `offset` of `count` bytes means for the reading half.
    enum Arrival: Equatable {
        /// New bytes: deliver the chunk from this index on (after a partial overlap, not 0).
        case deliver(from: Int)
        /// Bytes the reader already has (sent again after a resume): drop.
        case duplicate
        case violation(String)
    }

    func arrival(offset: UInt64, count: Int) -> Arrival {
        guard reads else { return .violation("data arrived on a direction the open excluded") }
        guard count <= ownChunkSize else {
            return .violation("a chunk of \(count) bytes is larger than the \(ownChunkSize) bytes agreed")
        }
        let end = offset + UInt64(count)
        if end <= receivedOffset || endReceived { return .duplicate }
        guard offset <= receivedOffset else {
            return .violation("a chunk at offset \(offset) leaves a gap after the \(receivedOffset) bytes received")
        }
        guard creditOutstanding > 0 else {
            return .violation("the writer sent more chunks than the \(window)-chunk window it was granted")
        }
        return .deliver(from: Int(receivedOffset - offset))
    }

    /// The credit granted on a resume: the window, less what the reader still holds.
    func resumeGrant() -> Int {
        creditOutstanding = max(0, window - unconsumed)
        return creditOutstanding
    }
}

extension StreamSession: StreamTableEntry {
    var isLive: Bool { failure == nil }
}
