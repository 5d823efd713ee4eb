import Foundation
import Glibc

/// The bytes of a bulk test stream: 256 KiB blocks of fixed pseudo-random bytes, each block's first
/// 8 bytes replaced by its index, so that lost, repeated or reordered blocks are caught.
public struct BulkPattern: Sendable {
    public static let blockSize = 256 * 1024
    let base: [UInt8]

    public init() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var bytes = [UInt8](repeating: 0, count: Self.blockSize)
        for index in 0..<Self.blockSize {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            bytes[index] = UInt8(truncatingIfNeeded: state)
        }
        base = bytes
    }

    /// Block `index` of the stream.
    public func block(_ index: Int) -> [UInt8] {
        var block = base
        withUnsafeBytes(of: UInt64(index).littleEndian) { header in
            for position in 0..<8 { block[position] = header[position] }
        }
        return block
    }

    /// Whether `chunk`, received at stream offset `offset`, holds exactly the pattern's bytes there.
    public func matches(_ chunk: Data, at offset: Int) -> Bool {
        chunk.withUnsafeBytes { received in
            var position = 0
            while position < received.count {
                let global = offset + position
                let blockIndex = global / Self.blockSize
                let inBlock = global % Self.blockSize
                let length = min(Self.blockSize - inBlock, received.count - position)
                var checked = 0
                if inBlock < 8 {
                    let header = withUnsafeBytes(of: UInt64(blockIndex).littleEndian) { Array($0) }
                    while checked < length && inBlock + checked < 8 {
                        if received[position + checked] != header[inBlock + checked] { return false }
                        checked += 1
                    }
                }
                if checked < length {
                    let same = base.withUnsafeBytes { expected in
                        memcmp(received.baseAddress! + position + checked, expected.baseAddress! + inBlock + checked, length - checked) == 0
                    }
                    if !same { return false }
                }
                position += length
            }
            return true
        }
    }
}

/// This process's peak resident memory (VmHWM) in KiB.
public func peakResidentKiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return -1 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }
    return -1
}
