import CHandoffChecksum
import Foundation
import HandoffWire
import Testing

@testable import Handoff
import HandoffTestSupport

/// The three checksums of the contract (stream.proto, ChecksumAlgorithm) as a stream's ends
/// compute them: the reference values of XXH64 and SHA-256, piece by piece as whole, and the
/// digest a writer copies its chunks with.
@Suite("Stream checksums")
struct StreamChecksumTests {
    /// The bytes the reference values below are of: byte i is (i × 131) ^ (i >> 7), truncated.
    static let bytes = (0..<1_000).map { UInt8(truncatingIfNeeded: ($0 &* 131) ^ ($0 >> 7)) }

    /// XXH64 (seed 0) of the first n bytes, from the reference implementation (Python's xxhash 3).
    static let xxh64Reference: [Int: UInt64] = [
        0: 0xef46db3751d8e999, 1: 0xe934a84adb052768, 3: 0xa83378d1eb86ec62, 4: 0x9882e57ed36c4cfc,
        8: 0xa5bc8d8944331fe7, 31: 0x1add2d10328c4897, 32: 0x333288d992cf3b16, 33: 0x379b60150f2cfc7f,
        63: 0x230f593878fe3703, 64: 0x60a3644ca073e2cb, 100: 0xacd07a6400e07def, 1_000: 0x4838877ad6107a27,
    ]

    func xxh64(_ pieces: [ArraySlice<UInt8>]) -> UInt64 {
        var context = handoff_xxh64()
        handoff_xxh64_init(&context)
        for piece in pieces { piece.withUnsafeBytes { handoff_xxh64_update(&context, $0.baseAddress, $0.count) } }
        return handoff_xxh64_final(&context)
    }

    @Test("XXH64 matches the reference implementation at every length where its rounds change (0 to 1,000 bytes), whole and in pieces")
    func xxh64MatchesReference() {
        #expect(xxh64([ArraySlice("abc".utf8)]) == 0x44bc2cf5ad770999)
        for (length, expected) in Self.xxh64Reference {
            let data = Self.bytes[0..<length]
            #expect(xxh64([data]) == expected, "\(length) bytes whole")
            // Pieces that straddle the 32-byte stripes: 1, 7, 30, 2, 33 … bytes.
            var pieces: [ArraySlice<UInt8>] = []
            var start = 0
            for size in [1, 7, 30, 2, 33, 64, 5].cycled() where start < length {
                pieces.append(data[start..<min(length, start + size)])
                start += size
            }
            #expect(xxh64(pieces) == expected, "\(length) bytes in \(pieces.count) pieces")
        }
    }

    func sha256(_ pieces: [ArraySlice<UInt8>], implementation: Int32) -> String {
        var context = handoff_sha256()
        handoff_sha256_init_using(implementation, &context)
        for piece in pieces { piece.withUnsafeBytes { handoff_sha256_update(&context, $0.baseAddress, $0.count) } }
        var digest = [UInt8](repeating: 0, count: 32)
        handoff_sha256_final(&context, &digest)
        return digest.map { String(format: "%02x", $0) }.joined()
    }

    @Test("SHA-256: every implementation this CPU runs (the SHA extensions where it has them) gives FIPS 180-4's examples and the portable rounds' digest at every length to 600 bytes and over 64 KiB, whole and in pieces")
    func sha256Implementations() {
        let examples: [(String, String)] = [
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
            (String(repeating: "a", count: 1_000_000), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
        ]
        let fastest = handoff_sha256_implementation()
        for implementation in HANDOFF_SHA256_PORTABLE...fastest {
            for (message, expected) in examples {
                #expect(sha256([ArraySlice(message.utf8)], implementation: implementation) == expected, "implementation \(implementation), \(message.utf8.count) bytes")
            }
        }
        guard fastest > HANDOFF_SHA256_PORTABLE else { return }
        let data = ArraySlice(patternBytes(70_000, seed: 9))
        for length in Array(0...600) + [4_095, 65_536, 70_000] {
            let message = data.prefix(length)
            let portable = sha256([message], implementation: HANDOFF_SHA256_PORTABLE)
            // Pieces that straddle the 64-byte blocks.
            var pieces: [ArraySlice<UInt8>] = []
            var start = message.startIndex
            let sizes = [1, 63, 65, 7, 128, 200, 4_096]
            while start < message.endIndex {
                let size = sizes[pieces.count % sizes.count]
                pieces.append(message[start..<min(message.endIndex, start + size)])
                start += size
            }
            #expect(sha256([message], implementation: fastest) == portable, "\(length) bytes whole")
            #expect(sha256(pieces, implementation: fastest) == portable, "\(length) bytes in \(pieces.count) pieces")
        }
    }

    @Test("a stream digest computes each algorithm, big-endian as StreamEnd carries it, the same copying a chunk as reading it")
    func digests() {
        let sha256OfAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        var sha = StreamDigest(.sha256)
        sha.update(Data("abc".utf8))
        #expect(StreamEndChecksum(algorithm: .sha256, value: sha.value).hex == sha256OfAbc)
        var xxh = StreamDigest(.xxh64)
        xxh.update(Data(Self.bytes))
        #expect(xxh.value == Data([0x48, 0x38, 0x87, 0x7a, 0xd6, 0x10, 0x7a, 0x27]))
        var crc = StreamDigest(.crc32c)
        crc.update(Data("123456789".utf8))
        #expect(crc.value == Data([0xE3, 0x06, 0x92, 0x83]))
        #expect(StreamDigest(nil).value.isEmpty)

        let data = patternBytes(300_001, seed: 5)
        for algorithm in StreamChecksum.allCases {
            var reading = StreamDigest(algorithm), copying = StreamDigest(algorithm)
            var copy = Data(count: data.count)
            copy.withUnsafeMutableBytes { destination in
                data.withUnsafeBytes { source in
                    for start in stride(from: 0, to: source.count, by: 65_536) {
                        let piece = UnsafeRawBufferPointer(rebasing: source[start..<min(source.count, start + 65_536)])
                        reading.update(piece)
                        copying.copy(piece, to: destination.baseAddress! + start)
                    }
                }
            }
            #expect(copy == data, "\(algorithm): the copy")
            #expect(reading.value == copying.value && reading.value.count == [.crc32c: 4, .xxh64: 8, .sha256: 32][algorithm], "\(algorithm)")
            // Reading the value does not end the digest: it goes on from there.
            var whole = StreamDigest(algorithm), split = StreamDigest(algorithm)
            whole.update(data)
            split.update(data.prefix(1_000))
            _ = split.value
            split.update(data.dropFirst(1_000))
            #expect(whole.value == split.value, "\(algorithm): read half way")
        }
    }

    @Test("a reader verifies an end in the algorithm it computed, and names it when the bytes do not match")
    func readerVerifies() throws {
        for algorithm in StreamChecksum.allCases {
            var received = ReceivedBytes(checksum: algorithm)
            received.absorb(Data(Self.bytes))
            let right = try #require(received.checksum)
            #expect(right.algorithm == algorithm)
            #expect(throws: Never.self) { try received.verifyEnd(total: 1_000, checksum: right) }
            var wrong = right.value
            wrong[0] ^= 1
            let error = #expect(throws: HandoffError.self) {
                try received.verifyEnd(total: 1_000, checksum: StreamEndChecksum(algorithm: algorithm, value: wrong))
            }
            #expect(error?.code == .streamChecksumMismatch && error?.message.contains("\(algorithm)") == true, "\(String(describing: error))")
        }
        // An end in an algorithm not computed here is held to its length only (the machine logged it).
        var unknown = ReceivedBytes(checksum: nil)
        unknown.absorb(Data(Self.bytes))
        #expect(unknown.checksum == nil)
        #expect(throws: Never.self) { try unknown.verifyEnd(total: 1_000, checksum: nil) }
    }
}

private extension Array {
    /// The elements again and again (enough for any stream of pieces these tests cut).
    func cycled() -> [Element] { Array((0..<64).flatMap { _ in self }) }
}
