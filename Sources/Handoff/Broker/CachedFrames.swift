import Foundation

/// A cached message's bytes, its topic's then its envelope's, in one allocation: what the broker's
/// cache keeps of each advertisement (a frame as received holds a share of libzmq's 8 KiB receive
/// buffer, which one long-lived advertisement would keep whole).
///
/// A class of its own rather than an `[UInt8]`: an array of bytes made outside the standard
/// library looks its storage class up (`_ContiguousArrayStorage<UInt8>`, a prespecialized generic)
/// in the runtime's metadata cache at every allocation, 1.3 % of the broker's thread in
/// `broker-capacity`, once per message cached. This class's metadata is made once.
final class CachedFrames: ManagedBuffer<CachedFrames.Header, UInt8> {
    struct Header {
        /// Bytes held: the topic's and the envelope's.
        var count: Int
        /// Of them, the topic's (the first frame's).
        var topicCount: Int
    }

    /// A copy of every frame of `frames`, one after another.
    static func copy(of frames: some MessageFrames) -> CachedFrames {
        let count = frames.totalSize
        let topicCount = frames.frameCount > 0 ? frames.size(ofFrame: 0) : 0
        let made = unsafeDowncast(create(minimumCapacity: count) { _ in Header(count: count, topicCount: topicCount) }, to: CachedFrames.self)
        made.withUnsafeMutablePointerToElements { base in
            var offset = 0
            for index in 0..<frames.frameCount {
                frames.withBytes(ofFrame: index) { bytes in
                    guard let source = bytes.baseAddress else { return }
                    (base + offset).initialize(from: source.assumingMemoryBound(to: UInt8.self), count: bytes.count)
                    offset += bytes.count
                }
            }
        }
        return made
    }

    /// Whether the topic begins with `prefix`.
    func topicStarts(with prefix: [UInt8]) -> Bool {
        let topicCount = header.topicCount
        guard prefix.count <= topicCount else { return false }
        return withUnsafeMutablePointerToElements { base in
            prefix.withUnsafeBufferPointer { prefix in
                prefix.isEmpty || memcmp(base, prefix.baseAddress!, prefix.count) == 0
            }
        }
    }

    /// The envelope's bytes (a snapshot's answer).
    var envelope: [UInt8] {
        let (count, topicCount) = (header.count, header.topicCount)
        return withUnsafeMutablePointerToElements { base in
            Array(UnsafeBufferPointer(start: base + topicCount, count: count - topicCount))
        }
    }
}
