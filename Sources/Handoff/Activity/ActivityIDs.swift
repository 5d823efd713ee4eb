import Glibc
import Synchronization

/// Activity ids: random (version 4) UUID strings, made cheaply because a node may make thousands a
/// second (`handoff-bench adverts` makes one per advertisement).
///
/// Foundation's `UUID()` opens /dev/urandom on every call on Linux, and the standard library's
/// generator makes one `getrandom` system call per 8 bytes; `uuidString` formats each byte with
/// `snprintf`. Here random bytes come 512 at a time from glibc's `arc4random_buf` (the kernel's
/// `getrandom`; 32 ids per call) and are formatted by hand, in the same upper-case form as
/// `UUID().uuidString`.
enum ActivityIDs {
    private struct Pool {
        var bytes = [UInt8](repeating: 0, count: 512)
        var used = 512
    }
    private static let pool = Mutex(Pool())
    private static let digits = Array("0123456789ABCDEF".utf8)

    /// A new id: 36 characters, `XXXXXXXX-XXXX-4XXX-YXXX-XXXXXXXXXXXX` in upper-case hex.
    static func make() -> String {
        // 16 bytes in two words, not an array: one allocation less for every activity made.
        var raw = take16()
        return withUnsafeMutableBytes(of: &raw) { bytes in
            bytes[6] = (bytes[6] & 0x0F) | 0x40  // version 4
            bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 4122 variant
            return format(UnsafeRawBufferPointer(bytes))
        }
    }

    /// Formats 16 bytes as a UUID string.
    static func format(_ raw: [UInt8]) -> String {
        raw.withUnsafeBytes { format($0) }
    }

    private static func format(_ raw: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: 36) { out in
            var index = 0
            for (position, byte) in raw.enumerated() {
                if position == 4 || position == 6 || position == 8 || position == 10 {
                    out[index] = UInt8(ascii: "-")
                    index += 1
                }
                out[index] = digits[Int(byte >> 4)]
                out[index + 1] = digits[Int(byte & 0x0F)]
                index += 2
            }
            return index
        }
    }

    /// 16 random bytes from the pool, refilled when spent.
    private static func take16() -> (UInt64, UInt64) {
        pool.withLock { pool in
            if pool.used + 16 > pool.bytes.count {
                refill(&pool.bytes)
                pool.used = 0
            }
            defer { pool.used += 16 }
            return pool.bytes.withUnsafeBytes { bytes in
                (bytes.loadUnaligned(fromByteOffset: pool.used, as: UInt64.self),
                 bytes.loadUnaligned(fromByteOffset: pool.used + 8, as: UInt64.self))
            }
        }
    }

    private static func refill(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { arc4random_buf($0.baseAddress!, $0.count) }
    }
}
