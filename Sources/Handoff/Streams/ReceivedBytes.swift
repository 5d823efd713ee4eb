import CHandoffChecksum
import Foundation

/// What a reader has received of one direction of a stream, and whether the writer's end agrees
/// with it (stream.proto: the end carries the length and CRC-32C). Kept by
/// ``ContinuationInputStream``'s iterator as the application reads (off the node's actor), and by
/// the simulator's readers.
struct ReceivedBytes {
    private(set) var count: UInt64 = 0
    private(set) var checksum: UInt32 = 0

    mutating func absorb(_ chunk: Data) {
        count += UInt64(chunk.count)
        checksum = chunk.withUnsafeBytes { handoff_crc32c(checksum, $0.baseAddress, $0.count) }
    }

    /// Checks the writer's end: its total against the bytes received, its checksum (when it sent
    /// one) against theirs.
    func verifyEnd(total: UInt64, checksum expected: UInt32?) throws(HandoffError) {
        guard total == count else {
            throw HandoffError(.streamTruncated, "the writer sent \(total) bytes but \(count) arrived")
        }
        if let expected, expected != checksum {
            throw HandoffError(.streamChecksumMismatch, String(format: "CRC-32C of the %llu bytes received is %08x, the writer's is %08x", count, checksum, expected))
        }
    }
}
