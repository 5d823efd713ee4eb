import Foundation
import HandoffWire

/// The continuing side of a stream open (wire.proto, StreamOpen), deciding with no I/O: whether
/// this node may open a pair for a continued activity now, the open it sends, and the error when
/// the originator does not answer it in time. The node connects and sends
/// (``Node/openStreams(for:direction:)``), the pair keeps the open's due time and fails it on a
/// tick past it (``StreamPair/expireOpen(now:unanswered:)``); tested without sockets
/// (StreamOpenRequestTests, StreamPairTests). The originator's answer is ``StreamOpenCheck``'s.
enum StreamOpenRequest {
    /// Whether a pair may be opened: for the activity's document (its originator's node sends it),
    /// or when the activity supports continuation streams; and while this node has fewer than
    /// `maxStreams` live pairs.
    static func check(supportsStreams: Bool, document: Bool, livePairs: Int, maxStreams: Int, activityType: String) throws(HandoffError) {
        guard supportsStreams || document else {
            throw HandoffError(.streamsNotSupported, "the activity does not support continuation streams", activityType: activityType)
        }
        guard livePairs < maxStreams else {
            throw HandoffError(.tooManyStreams, "this node already has \(livePairs) stream pairs open, its limit (maxStreams)", activityType: activityType)
        }
    }

    /// The open this node sends: the halves it wants, its own window, chunk size and checksum,
    /// and whether it asks for the activity's document.
    static func open(
        activityID: String, direction: WireStreamDirection, window: Int, chunkSize: Int, checksum: WireChecksumAlgorithm, document: Bool
    ) -> WireStreamOpen {
        var request = WireStreamOpen()
        request.activityID = activityID
        request.direction = direction
        request.window = UInt32(window)
        request.chunkSize = UInt32(chunkSize)
        request.document = document
        request.checksumAlgorithm = checksum
        return request
    }

    /// The error an open fails with when the originator at `endpoint` did not answer within `timeout`.
    static func unanswered(endpoint: String, timeout: Duration, activityType: String) -> HandoffError {
        HandoffError(.remoteApplicationTimedOut, "the originator at \(endpoint) did not answer the request to open streams within \(timeout) (continueTimeout)", activityType: activityType)
    }
}
