import CHandoffChecksum
import Foundation
import HandoffWire

/// The checksum a continuation stream's writer ends each direction with (stream.proto,
/// `ChecksumAlgorithm`). The writer announces it when the pair opens, so its reader computes the
/// same as the bytes arrive; Handoff readers verify all three.
public enum StreamChecksum: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// CRC-32C: the CPU's crc32 instruction, copied and checked in one pass; the default.
    case crc32c
    /// XXH64 (seed 0): a fast 64-bit hash, for writers that already use it.
    case xxh64
    /// SHA-256: a cryptographic digest, far slower (a few hundred MB/s), for applications whose
    /// bytes must match a digest they keep.
    case sha256

    public var description: String {
        switch self {
        case .crc32c: "CRC-32C"
        case .xxh64: "XXH64"
        case .sha256: "SHA-256"
        }
    }

    var wire: WireChecksumAlgorithm {
        switch self {
        case .crc32c: .crc32C
        case .xxh64: .xxh64
        case .sha256: .sha256
        }
    }

    /// The algorithm a StreamEnd carries: `nil` for none (UNSPECIFIED) or one this side does not know.
    init?(wire: WireChecksumAlgorithm) {
        switch wire {
        case .crc32C: self = .crc32c
        case .xxh64: self = .xxh64
        case .sha256: self = .sha256
        case .unspecified, .UNRECOGNIZED: return nil
        }
    }

    /// The algorithm a writer's end will carry, from what its StreamOpen announced: none announced
    /// is CRC-32C (writers before the field); one this side does not know is `nil` (nothing to compute).
    static func announced(_ wire: WireChecksumAlgorithm) -> StreamChecksum? {
        wire == .unspecified ? .crc32c : StreamChecksum(wire: wire)
    }

    /// What a StreamEnd carries, in words: "no checksum", or a checksum of its algorithm (for the
    /// log of an end not verified, and the refusal of one when verified ends are required).
    static func carried(_ wire: WireChecksumAlgorithm) -> String {
        wire == .unspecified ? "no checksum" : "a checksum of \(StreamChecksum(wire: wire)?.description ?? "unknown algorithm \(wire.rawValue)")"
    }
}

/// A running checksum of one direction's bytes, in the algorithm its writer announced.
struct StreamDigest {
    private enum State {
        case crc32c(UInt32)
        case xxh64(handoff_xxh64)
        case sha256(handoff_sha256)
        /// The writer announced an algorithm this side does not know: nothing is computed.
        case none
    }

    let algorithm: StreamChecksum?
    private var state: State

    init(_ algorithm: StreamChecksum?) {
        self.algorithm = algorithm
        switch algorithm {
        case .crc32c:
            state = .crc32c(0)
        case .xxh64:
            var context = handoff_xxh64()
            handoff_xxh64_init(&context)
            state = .xxh64(context)
        case .sha256:
            var context = handoff_sha256()
            handoff_sha256_init(&context)
            state = .sha256(context)
        case nil:
            state = .none
        }
    }

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        switch state {
        case .crc32c(let crc):
            state = .crc32c(handoff_crc32c(crc, bytes.baseAddress, bytes.count))
        case .xxh64(var context):
            handoff_xxh64_update(&context, bytes.baseAddress, bytes.count)
            state = .xxh64(context)
        case .sha256(var context):
            handoff_sha256_update(&context, bytes.baseAddress, bytes.count)
            state = .sha256(context)
        case .none:
            break
        }
    }

    mutating func update(_ bytes: Data) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Copies `source` to `destination` (which must not overlap) and adds it, as a writer fills
    /// libzmq's buffer: CRC-32C in one pass over the bytes; the others a piece at a time, each
    /// piece hashed while the copy has it in the cache (a whole 256 KiB chunk copied, then hashed,
    /// is read from further away twice).
    mutating func copy(_ source: UnsafeRawBufferPointer, to destination: UnsafeMutableRawPointer) {
        if case .crc32c(let crc) = state {
            state = .crc32c(handoff_crc32c_copy(crc, destination, source.baseAddress, source.count))
            return
        }
        guard let base = source.baseAddress else { return }
        let piece = 16 * 1024
        for start in stride(from: 0, to: source.count, by: piece) {
            let count = min(piece, source.count - start)
            (destination + start).copyMemory(from: base + start, byteCount: count)
            update(UnsafeRawBufferPointer(start: base + start, count: count))
        }
    }

    /// The checksum of everything added so far with its algorithm, as a StreamEnd carries it;
    /// `nil` when nothing is computed. The digest can go on after it.
    var checksum: StreamEndChecksum? {
        algorithm.map { StreamEndChecksum(algorithm: $0, value: value) }
    }

    /// The checksum of everything added so far, as a StreamEnd carries it (big-endian integers;
    /// empty when nothing is computed). The digest can go on after it.
    var value: Data {
        switch state {
        case .crc32c(let crc):
            return Self.bigEndian(UInt64(crc), bytes: 4)
        case .xxh64(let context):
            var copy = context
            return Self.bigEndian(handoff_xxh64_final(&copy), bytes: 8)
        case .sha256(let context):
            var copy = context
            var digest = [UInt8](repeating: 0, count: 32)
            handoff_sha256_final(&copy, &digest)
            return Data(digest)
        case .none:
            return Data()
        }
    }

    private static func bigEndian(_ value: UInt64, bytes: Int) -> Data {
        Data((0..<bytes).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * $0)) })
    }
}

/// A checksum as a StreamEnd carries it.
struct StreamEndChecksum: Equatable, Sendable, CustomStringConvertible {
    let algorithm: StreamChecksum
    let value: Data

    /// The value in hexadecimal, as errors and logs show it.
    var hex: String { value.map { String(format: "%02x", $0) }.joined() }

    var description: String { "\(algorithm) \(hex)" }
}
