import CZeroMQ
import Foundation

/// One frame of a ZeroMQ message, owning a `zmq_msg_t`.
///
/// A `Frame` never changes after it is made, so it may cross threads and tasks. Sending one does
/// not consume it: libzmq shares the bytes of large frames by reference count, so the same frame
/// can be sent to many sockets without copying its contents.
///
/// Ways to make one without a needless copy:
/// - ``init(count:initializingWith:)`` lets you write the bytes straight into libzmq's buffer;
/// - ``init(bytesNoCopy:deallocator:)`` hands libzmq a buffer you own until it calls you back;
/// - a received frame exposes its bytes in place through ``withUnsafeBytes(_:)``.
public final class Frame: @unchecked Sendable {
    // Invariant for @unchecked Sendable: `storage` is initialized in init, never written after
    // init returns (sending sends a zmq_msg_copy), and closed only in deinit.
    @usableFromInline let storage: UnsafeMutablePointer<zmq_msg_t>

    /// Whether more frames of the same multipart message follow this one (set on received frames).
    public let hasMore: Bool

    /// Makes an empty frame.
    public init() {
        storage = .allocate(capacity: 1)
        zmq_msg_init(storage)
        hasMore = false
    }

    /// Makes a frame holding a copy of `bytes`.
    public convenience init(_ bytes: some ContiguousBytes) {
        self.init(copying: bytes)
    }

    /// Makes a frame holding the UTF-8 bytes of `string`.
    public convenience init(_ string: String) {
        self.init(copying: Array(string.utf8))
    }

    private init(copying bytes: some ContiguousBytes) {
        storage = .allocate(capacity: 1)
        hasMore = false
        bytes.withUnsafeBytes { buffer in
            // zmq_msg_init_size only fails when malloc does: treat like Swift's own allocation failure.
            precondition(zmq_msg_init_size(storage, buffer.count) == 0, "zmq_msg_init_size: out of memory")
            if buffer.count > 0 {
                zmq_msg_data(storage).copyMemory(from: buffer.baseAddress!, byteCount: buffer.count)
            }
        }
    }

    /// Makes a frame of `count` bytes and lets `body` write them in place, without an intermediate buffer.
    ///
    /// - Parameters:
    ///   - count: The frame's size in bytes.
    ///   - body: Writes the frame's contents; it is given exactly `count` bytes.
    public init<E: Error>(
        count: Int,
        initializingWith body: (UnsafeMutableRawBufferPointer) throws(E) -> Void
    ) throws(E) {
        storage = .allocate(capacity: 1)
        hasMore = false
        precondition(zmq_msg_init_size(storage, count) == 0, "zmq_msg_init_size: out of memory")
        do {
            try body(UnsafeMutableRawBufferPointer(start: zmq_msg_data(storage), count: count))
        } catch {
            zmq_msg_close(storage)
            storage.deallocate()
            throw error
        }
    }

    /// Makes a frame over memory you own, without copying it.
    ///
    /// libzmq reads the bytes until the last copy of the frame has been sent or dropped, then calls
    /// `deallocator` — possibly on one of its I/O threads. Do not change the bytes before then.
    public init(
        bytesNoCopy bytes: UnsafeMutableRawBufferPointer,
        deallocator: @escaping @Sendable (UnsafeMutableRawBufferPointer) -> Void
    ) {
        storage = .allocate(capacity: 1)
        hasMore = false
        let box = Unmanaged.passRetained(DeallocatorBox(bytes: bytes, deallocator: deallocator))
        let rc = zmq_msg_init_data(
            storage, bytes.baseAddress, bytes.count,
            { _, hint in
                let box = Unmanaged<DeallocatorBox>.fromOpaque(hint!).takeRetainedValue()
                box.deallocator(box.bytes)
            },
            box.toOpaque())
        precondition(rc == 0, "zmq_msg_init_data: out of memory")
    }

    /// Takes over a received `zmq_msg_t`, leaving `source` empty.
    init(moving source: UnsafeMutablePointer<zmq_msg_t>) {
        storage = .allocate(capacity: 1)
        zmq_msg_init(storage)
        zmq_msg_move(storage, source)
        hasMore = zmq_msg_more(storage) == 1
    }

    /// A frame sharing the bytes of `source` (`zmq_msg_copy`), which stays as it is.
    init(sharing source: UnsafeMutablePointer<zmq_msg_t>) {
        storage = .allocate(capacity: 1)
        zmq_msg_init(storage)
        zmq_msg_copy(storage, source)
        hasMore = zmq_msg_more(storage) == 1
    }

    deinit {
        zmq_msg_close(storage)
        storage.deallocate()
    }

    /// The frame's size in bytes.
    @inlinable public var count: Int { zmq_msg_size(storage) }

    /// Calls `body` with the frame's bytes in place. The pointer is valid only inside `body`.
    ///
    /// Inlinable so that a caller's closure and result are specialised where it is called: a broker
    /// reads every message through it, and the generic call copied each result through its value
    /// witnesses (a retain and a release per field).
    @inlinable public func withUnsafeBytes<R, E: Error>(
        _ body: (UnsafeRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: zmq_msg_data(storage), count: count))
    }

    /// A copy of the frame's bytes.
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    /// A copy of the frame's bytes as `Data`.
    public var data: Data { withUnsafeBytes { Data($0) } }

    /// The frame's bytes as `Data` without a copy: the `Data` shares the frame's buffer and keeps the
    /// frame alive until the last copy of the `Data` is gone.
    public var dataWithoutCopying: Data {
        withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress, bytes.count > 0 else { return Data() }
            return Data(
                bytesNoCopy: UnsafeMutableRawPointer(mutating: base), count: bytes.count,
                deallocator: .custom { _, _ in withExtendedLifetime(self) {} })
        }
    }

    /// The frame as UTF-8 text, or `nil` when it is not valid UTF-8.
    public var string: String? {
        withUnsafeBytes { String(validating: $0, as: UTF8.self) }
    }

    /// A metadata property of a received frame: "Socket-Type", "Routing-Id", "User-Id" (set by a
    /// ZAP handler), "Peer-Address", or any property a ZAP handler attached. `nil` when absent.
    public func property(_ name: String) -> String? {
        // withCString: a short name ("User-Id") is stored inline, and passing the String itself
        // made an array for its C string on every call (a continue's server asks once per request).
        guard let value = name.withCString({ zmq_msg_gets(storage, $0) }) else { return nil }
        return String(cString: value)
    }

}

extension Array where Element == Frame {
    /// The frames' bytes one after another, in one allocation: what a broker keeps of a message
    /// (a frame as received holds a share of libzmq's 8 KiB receive buffer, which a kept frame
    /// would keep whole).
    public func joinedBytes() -> [UInt8] {
        joinedFrames(count) { index, body in self[index].withUnsafeBytes(body) }
    }

    /// The same bytes in a ``JoinedFrames``, whose allocation costs no metadata lookup.
    public func joined() -> JoinedFrames {
        JoinedFrames.make(count) { index, body in self[index].withUnsafeBytes(body) }
    }
}

/// Gives frame `index`'s bytes, in place, to the closure it is passed.
typealias FrameBytes = (_ index: Int, (UnsafeRawBufferPointer) -> Void) -> Void

/// `frames` frames' bytes one after another in one array; `withFrame` gives each in place.
func joinedFrames(_ frames: Int, _ withFrame: FrameBytes) -> [UInt8] {
    let count = totalSize(frames, withFrame)
    return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        copyFrames(frames, withFrame, to: UnsafeMutableRawPointer(buffer.baseAddress))
        initialized = count
    }
}

/// The bytes of `frames` frames in all.
func totalSize(_ frames: Int, _ withFrame: FrameBytes) -> Int {
    var count = 0
    for index in 0..<frames { withFrame(index) { count += $0.count } }
    return count
}

/// Copies `frames` frames' bytes one after another to `destination`, which has room for them all
/// (`nil` only when they are all empty).
func copyFrames(_ frames: Int, _ withFrame: FrameBytes, to destination: UnsafeMutableRawPointer?) {
    var offset = 0
    for index in 0..<frames {
        withFrame(index) { bytes in
            guard let source = bytes.baseAddress, let destination else { return }
            (destination + offset).copyMemory(from: source, byteCount: bytes.count)
            offset += bytes.count
        }
    }
}

extension Frame: CustomStringConvertible {
    public var description: String {
        let n = count
        if let text = string, text.utf8.count <= 64, !text.contains(where: { $0.isNewline }) {
            return "Frame(\(n) bytes: \"\(text)\")"
        }
        return "Frame(\(n) bytes)"
    }
}

private final class DeallocatorBox {
    let bytes: UnsafeMutableRawBufferPointer
    let deallocator: @Sendable (UnsafeMutableRawBufferPointer) -> Void
    init(bytes: UnsafeMutableRawBufferPointer, deallocator: @escaping @Sendable (UnsafeMutableRawBufferPointer) -> Void) {
        self.bytes = bytes
        self.deallocator = deallocator
    }
}
