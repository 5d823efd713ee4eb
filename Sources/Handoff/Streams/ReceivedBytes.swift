import Foundation

/// What a reader has received of one direction of a stream, and whether the writer's end agrees
/// with it (stream.proto: the end carries the length and the checksum its writer announced). Kept
/// by ``ContinuationInputStream``'s iterator as the application reads (off the node's actor), and
/// by the simulator's readers.
struct ReceivedBytes {
    private(set) var count: UInt64 = 0
    private(set) var digest: StreamDigest

    /// `checksum`: what the writer announced it ends with (`nil`: one this side does not compute).
    init(checksum: StreamChecksum? = .crc32c) {
        digest = StreamDigest(checksum)
    }

    mutating func absorb(_ chunk: Data) {
        count += UInt64(chunk.count)
        digest.update(chunk)
    }

    /// The checksum of what arrived, in the writer's algorithm (`nil` when none is computed).
    var checksum: StreamEndChecksum? { digest.checksum }

    /// Checks the writer's end: its total against the bytes received, its checksum (when it sent
    /// one in the algorithm computed here) against theirs.
    func verifyEnd(total: UInt64, checksum expected: StreamEndChecksum?) throws(HandoffError) {
        guard total == count else {
            throw HandoffError(.streamTruncated, "the writer sent \(total) bytes but \(count) arrived")
        }
        if let expected, let received = checksum, expected.algorithm == received.algorithm, expected.value != received.value {
            throw HandoffError(.streamChecksumMismatch, "\(received.algorithm) of the \(count) bytes received is \(received.hex), the writer's is \(expected.hex)")
        }
    }
}
