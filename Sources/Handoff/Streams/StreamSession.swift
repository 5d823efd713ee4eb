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

/// One stream pair on a node (either end): the shell around its protocol, ``StreamPair``, holding
/// what the machine does not — where its frames go, who waits on it (the opener, a writer out of
/// credit) and the reader's queue. Owned by the node actor, which carries the machine's actions out
/// (``Node/perform(_:on:)``).
final class StreamSession {
    let key: StreamKey
    var route: StreamRoute
    let activityID: String
    /// Who the peer is, for the per-peer limit: its CURVE key, or its node id without security.
    let owner: String
    /// The originator's CURVE key, to connect to it again for a resume (continuing side).
    var originKey: CurveKey?
    /// The other node as it names itself (the originator's advertisement, or the continuing
    /// node's envelope), for the pair's node events (`NodeEvent.peer`).
    var peer: WireNodeRef?
    /// The protocol: credit, offsets, what is kept for a resume, liveness.
    var pair: StreamPair
    /// The writer waits here for credit (or the resume).
    var creditWaiter: CheckedContinuation<Void, Never>?
    /// The continuing side waits here for the originator's answer to its open.
    var openWaiter: CheckedContinuation<Result<WireStreamOpen, HandoffError>, Never>?
    /// Bytes (sent, arrived) when progress was last published.
    var reported: (sent: UInt64, received: UInt64) = (0, 0)
    /// When progress was last published: at most ``progressInterval`` apart (wire.proto,
    /// `NodeEvent`: four a second per pair), however often the node's clock wakes (every 10 ms
    /// while it paces a pass over its activities).
    var progressReportedAt: ContinuousClock.Instant?
    static let progressInterval = Duration.milliseconds(250)

    /// Whether progress is published now: bytes moved since the last, and that was long enough ago.
    func progressDue(now: ContinuousClock.Instant) -> Bool {
        (pair.bytesSent, pair.bytesArrived) != reported && progressReportedAt.map { now - $0 >= Self.progressInterval } ?? true
    }
    var failureReported = false
    /// The trace its open carries (wire.proto, "Tracing"): on the continuing side, the traced
    /// continue's, set on its open; on the originating side, while its end is still to be reported.
    var traceID: String?

    /// What arrives for the reader.
    let incoming = StreamInbox()
    /// What the node shares with the application's reader and writer, for the pair's life.
    let reading: StreamReadingSide
    let writing: StreamWritingSide
    /// The handles the application holds (``streams``), not kept alive by the node: once the
    /// application let them all go, ``ApplicationHold`` tells the node.
    private weak var heldInput: ContinuationInputStream?
    private weak var heldOutput: ContinuationOutputStream?
    private weak var hold: ApplicationHold?
    /// The generation of the hold handed out last (``ApplicationHold/generation``).
    private(set) var holdGeneration = 0

    /// `checksum`: what this side's writer ends with (its open announces it).
    init(node: Node, key: StreamKey, route: StreamRoute, activityID: String, owner: String, pair: StreamPair, checksum: StreamChecksum) {
        self.key = key
        self.route = route
        self.activityID = activityID
        self.owner = owner
        self.pair = pair
        reading = StreamReadingSide(node: node, key: key, events: incoming, window: pair.window, enabled: pair.reads)
        writing = StreamWritingSide(node: node, key: key, chunkSize: pair.writeChunkSize, enabled: pair.writes, checksum: checksum)
        if !pair.reads {
            // The open excluded this direction: the reading half is empty and already ended.
            incoming.yield(.end(total: 0, checksum: nil))
            incoming.finish()
        }
    }

    deinit {
        // A reader still waiting when the node lets the pair go unfinished (its node shut down)
        // ends: its iteration throws, instead of waiting for ever.
        incoming.finish()
    }

    var activityType: String { pair.activityType }
    var isContinuer: Bool { pair.isContinuer }
    var failure: HandoffError? { pair.failure }

    /// The pair as the application holds it: the handles it holds now, if it holds any, else new
    /// ones under a new hold.
    var streams: ContinuationStreams {
        let hold = self.hold ?? {
            holdGeneration += 1
            let made = ApplicationHold(node: reading.node, key: key, generation: holdGeneration)
            self.hold = made
            return made
        }()
        let input = heldInput ?? ContinuationInputStream(side: reading, hold: hold)
        let output = heldOutput ?? ContinuationOutputStream(side: writing, hold: hold)
        (heldInput, heldOutput) = (input, output)
        return ContinuationStreams(id: route.id, activityID: activityID, input: input, output: output)
    }

    /// The pair handed to the application it is for (the continuing one's `openStreams`, the
    /// originator's delegate or document sender): only then does its letting go end anything. A
    /// hold made before (``Node/openStreams`` read while the open was unanswered) and let go is
    /// not the application's.
    private(set) var handedOut = false

    func handOut() -> ContinuationStreams {
        handedOut = true
        return streams
    }

    /// Whether the application holds the pair again, or still, after the hold of `generation`
    /// went (a handle handed out since, a newer hold, keeps the pair the application's), or never
    /// had it: then its letting go ends nothing.
    func heldAfterLetGo(of generation: Int) -> Bool { !handedOut || hold != nil || holdGeneration != generation }

    /// Whether the pair waits on its peer, not on this side (``StreamPair/waitsOnPeer(writerWaiting:)``).
    var waitsOnPeer: Bool { pair.waitsOnPeer(writerWaiting: creditWaiter != nil) }

    /// The pair failed: the reader's iteration throws the error, a waiting writer and opener wake to it.
    func failed(_ error: HandoffError) {
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
}

extension StreamSession: StreamTableEntry {
    var failedAt: ContinuousClock.Instant? { pair.failedAt }
    var resumeToken: Data { pair.resumeToken }
    var peersTurnSince: ContinuousClock.Instant { pair.peersTurnSince }
}
