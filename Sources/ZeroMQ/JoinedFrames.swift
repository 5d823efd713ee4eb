import Foundation

/// A message's frames' bytes one after another, in one allocation of a class of its own: what a
/// broker keeps of a message (a frame as received holds a share of libzmq's 8 KiB receive buffer,
/// which one long-lived message would keep whole).
///
/// Not an `[UInt8]` (``Swift/Array/joinedBytes()``): an array of bytes made outside the standard
/// library looks its storage class up (`_ContiguousArrayStorage<UInt8>`, a prespecialized generic)
/// in the runtime's metadata cache at every allocation, 1.3 % of a broker's thread in
/// `handoff-bench broker-capacity`, once per message it keeps. This class's metadata is made once.
public final class JoinedFrames: ManagedBuffer<JoinedFrames.Header, UInt8> {
    public struct Header: Sendable {
        /// Bytes held, every frame's.
        public let count: Int
        /// Of them, the first frame's (a bus message's topic).
        public let firstFrameCount: Int
    }

    /// `frames` frames, each given in place by `withFrame`, copied one after another.
    static func make(_ frames: Int, _ withFrame: FrameBytes) -> JoinedFrames {
        let count = totalSize(frames, withFrame)
        var first = 0
        if frames > 0 { withFrame(0) { first = $0.count } }
        let made = unsafeDowncast(create(minimumCapacity: count) { _ in Header(count: count, firstFrameCount: first) }, to: JoinedFrames.self)
        made.withUnsafeMutablePointerToElements { copyFrames(frames, withFrame, to: UnsafeMutableRawPointer($0)) }
        return made
    }

    /// Whether the first frame begins with `prefix` (a topic's).
    public func firstFrameStarts(with prefix: [UInt8]) -> Bool {
        guard prefix.count <= header.firstFrameCount else { return false }
        return withUnsafeMutablePointerToElements { base in
            prefix.withUnsafeBytes { prefix in prefix.isEmpty || memcmp(base, prefix.baseAddress!, prefix.count) == 0 }
        }
    }

    /// The bytes after the first frame (a bus message's envelope).
    public var afterFirstFrame: [UInt8] {
        let (count, first) = (header.count, header.firstFrameCount)
        return withUnsafeMutablePointerToElements { Array(UnsafeBufferPointer(start: $0 + first, count: count - first)) }
    }
}

extension JoinedFrames {
    /// Every byte held (each frame's, one after another), borrowed for `body`.
    public func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let count = header.count
        return try withUnsafeMutablePointerToElements { try body(UnsafeRawBufferPointer(start: $0, count: count)) }
    }
}
