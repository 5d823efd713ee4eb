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

    /// What arrives for the reader (``input``).
    let incoming = StreamInbox()
    let input: ContinuationInputStream
    let output: ContinuationOutputStream

    /// `checksum`: what this side's writer ends with (its open announces it).
    init(node: Node, key: StreamKey, route: StreamRoute, activityID: String, owner: String, pair: StreamPair, checksum: StreamChecksum) {
        self.key = key
        self.route = route
        self.activityID = activityID
        self.owner = owner
        self.pair = pair
        input = ContinuationInputStream(node: node, key: key, events: incoming, window: pair.window, enabled: pair.reads)
        output = ContinuationOutputStream(node: node, key: key, chunkSize: pair.writeChunkSize, enabled: pair.writes, checksum: checksum)
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

    var streams: ContinuationStreams {
        ContinuationStreams(id: route.id, activityID: activityID, input: input, output: output)
    }

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
