import Foundation
import HandoffWire

/// The originator's answer to a stream open (wire.proto, StreamOpen), deciding with no I/O: which
/// current activity the pair is for and who writes or reads its end (the node itself for the
/// activity's document, otherwise the activity's delegate), or the precise reason it is refused;
/// then, once the node counted its pairs (``StreamTable/admission(owner:maxStreams:maxStreamsPerPeer:)``),
/// whether a limit refuses it, and the answer that accepts it. Tested without sockets
/// (StreamOpenCheckTests); the simulator's originators decide by it too.
enum StreamOpenCheck: Equatable {
    /// Open the pair for this activity: the node sends `document` itself when there is one (an
    /// open that asked for it), otherwise the activity's delegate gets the pair.
    case accept(UserActivity, document: DocumentReference?)
    /// Refuse with this error.
    case refuse(HandoffError)

    static func check(_ open: WireStreamOpen, in current: CurrentActivities, node: String) -> StreamOpenCheck {
        guard WireLimits.fits(activityID: open.activityID, activityType: "") else {
            return .refuse(WireLimits.oversizedIdentifiers(activityID: open.activityID, activityType: ""))
        }
        guard let activity = current[open.activityID] else {
            return .refuse(HandoffError(.activityNotFound, "\(node) has no current activity \(open.activityID)"))
        }
        // The document (StreamOpen.document) is a local file the node sends itself, to the continuer only.
        let document = open.document ? activity.document : nil
        if open.document {
            guard let document, document.url.isFileURL, open.direction == .originToContinuer else {
                return .refuse(HandoffError(.streamsNotSupported, activity.document == nil
                    ? "the activity refers to no document" : "a document is sent from the originator only (direction ORIGIN_TO_CONTINUER)",
                    activityType: activity.activityType))
            }
        }
        guard document != nil || (activity.supportsContinuationStreams && activity.delegate != nil) else {
            return .refuse(HandoffError(.streamsNotSupported, activity.supportsContinuationStreams
                ? "the activity has no delegate to receive streams" : "the activity does not support continuation streams",
                activityType: activity.activityType))
        }
        if case .UNRECOGNIZED(let value) = open.direction {
            return .refuse(HandoffError(.malformedMessage, "unknown stream direction \(value)", activityType: activity.activityType))
        }
        return .accept(activity, document: document)
    }

    /// Whether evicting one stalled pair may let an open in that `admission` refuses: the node is
    /// full, and this peer is under its own limit (evicting another peer's pair for a peer at its
    /// limit would not admit it).
    static func evictionMayAdmit(_ admission: StreamAdmission, maxStreamsPerPeer: Int) -> Bool {
        if case .nodeFull(_, let fromPeer) = admission { fromPeer < maxStreamsPerPeer } else { false }
    }

    /// A refusal by a limit: the error as the peer gets it (`tooManyStreams`, with the limit's scope
    /// and size in its details) and the line for the log; nil when `admission` admits the pair.
    static func overLimit(
        _ admission: StreamAdmission, node: String, owner: String, activityType: String, maxStreams: Int, maxStreamsPerPeer: Int
    ) -> (wire: WireError, logged: String)? {
        let (scope, limit, logged, message): (String, Int, String, String)
        switch admission {
        case .admitted:
            return nil
        case .nodeFull(let open, _):
            (scope, limit, logged, message) = ("node", maxStreams, "the node has \(open) pairs open", "\(node) already has \(open) stream pairs open, its limit")
        case .peerFull(let fromPeer):
            (scope, limit, logged, message) = ("peer", maxStreamsPerPeer, "peer \(owner) has \(fromPeer) pairs open",
                                               "\(node) already has \(fromPeer) stream pairs open with this peer, its limit per peer")
        }
        var wire = HandoffError(.tooManyStreams, message, activityType: activityType).wire
        wire.details["scope"] = scope
        wire.details["limit"] = "\(limit)"
        return (wire, logged)
    }

    /// The originator's answer that accepts `open`: its own window, chunk size and checksum, the
    /// token a resume must present (random, drawn by the caller), and a document's length.
    static func answer(
        _ open: WireStreamOpen, document: DocumentReference?, window: Int, chunkSize: Int, checksum: WireChecksumAlgorithm, resumeToken: Data
    ) -> WireStreamOpen {
        var answer = WireStreamOpen()
        answer.activityID = open.activityID
        answer.direction = open.direction
        answer.window = UInt32(window)
        answer.chunkSize = UInt32(chunkSize)
        answer.resumeToken = resumeToken
        answer.document = open.document
        answer.checksumAlgorithm = checksum
        if let document { answer.expectedLength = document.size }
        return answer
    }

    static func == (lhs: StreamOpenCheck, rhs: StreamOpenCheck) -> Bool {
        switch (lhs, rhs) {
        case (.accept(let a, let x), .accept(let b, let y)): a === b && x == y
        case (.refuse(let a), .refuse(let b)): a == b
        default: false
        }
    }
}
