import CZeroMQ

/// One whole multipart message received into `zmq_msg_t`s that this value keeps and reuses for the
/// next message: receiving and forwarding through it allocates nothing.
///
/// For a loop that receives, reads each message in place and passes it on before it takes the
/// next (a broker): ``Frame`` costs an object and a `zmq_msg_t` per frame and an array per
/// message, which at a broker's rate is a third of what it does with a message. Sending a frame of
/// it shares the bytes with libzmq (`zmq_msg_copy`), as sending a ``Frame`` does; ``frame(_:)``
/// makes a ``Frame`` of one for code that keeps it.
///
/// Not `Sendable`: it belongs to the socket's owner, and the next receive replaces what it holds.
public final class ReceivedMessage {
    /// The most frames it keeps; a longer message is read whole and marked ``isOverlong``.
    public let capacity: Int
    @usableFromInline let messages: UnsafeMutablePointer<zmq_msg_t>
    /// Where frames past ``capacity`` are read and dropped.
    private let overflow: UnsafeMutablePointer<zmq_msg_t>
    /// How many frames it holds and whether the message was longer, kept in memory of its own:
    /// a class's stored `var` is checked for exclusive access at run time on every read and write,
    /// and a broker reads the count a dozen times a message.
    @usableFromInline let state: UnsafeMutablePointer<(count: Int, isOverlong: Bool)>

    /// The descriptor of the connection the message came in on (``Frame/sourceDescriptor``, of its
    /// first frame); `nil` for none held, or one the socket made itself or an inproc peer sent.
    public var sourceDescriptor: Int32? {
        guard count > 0 else { return nil }
        let descriptor = zmq_msg_get(messages, ZMQ_SRCFD)
        return descriptor < 0 ? nil : descriptor
    }

    /// The frames received (at most ``capacity``).
    @inlinable public var count: Int { state.pointee.count }
    /// The message had more frames than ``capacity``: the rest were read and dropped.
    public var isOverlong: Bool { state.pointee.isOverlong }

    public init(capacity: Int) {
        precondition(capacity > 0, "a message has at least one frame")
        self.capacity = capacity
        messages = .allocate(capacity: capacity)
        for index in 0..<capacity { zmq_msg_init(messages + index) }
        overflow = .allocate(capacity: 1)
        zmq_msg_init(overflow)
        state = .allocate(capacity: 1)
        state.initialize(to: (0, false))
    }

    deinit {
        for index in 0..<capacity { zmq_msg_close(messages + index) }
        messages.deallocate()
        zmq_msg_close(overflow)
        overflow.deallocate()
        state.deallocate()
    }

    /// The size of frame `index` in bytes.
    @inlinable public func size(ofFrame index: Int) -> Int {
        precondition(index < count, "frame \(index) of a message of \(count)")
        return zmq_msg_size(messages + index)
    }

    /// Calls `body` with the bytes of frame `index` in place; valid only inside `body`.
    @inlinable public func withUnsafeBytes<R, E: Error>(
        ofFrame index: Int, _ body: (UnsafeRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        precondition(index < count, "frame \(index) of a message of \(count)")
        return try body(UnsafeRawBufferPointer(start: zmq_msg_data(messages + index), count: zmq_msg_size(messages + index)))
    }

    /// A metadata property of frame `index` (see ``Frame/property(_:)``).
    public func property(_ name: String, ofFrame index: Int) -> String? {
        precondition(index < count, "frame \(index) of a message of \(count)")
        guard let value = zmq_msg_gets(messages + index, name) else { return nil }
        return String(cString: value)
    }

    /// The same, read in place (`nil`: none): no `String` made, for code that looks at it per message.
    /// (The name a literal: a `String` would be copied into a C string at every call.)
    public func withProperty<R>(_ name: StaticString, ofFrame index: Int, _ body: (UnsafePointer<CChar>?) -> R) -> R {
        precondition(index < count, "frame \(index) of a message of \(count)")
        precondition(name.hasPointerRepresentation, "a property's name is text")
        return body(zmq_msg_gets(messages + index, UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self)))
    }

    /// Frame `index` as a ``Frame`` of its own, sharing the bytes: for code that keeps it.
    public func frame(_ index: Int) -> Frame {
        precondition(index < count, "frame \(index) of a message of \(count)")
        return Frame(sharing: messages + index)
    }

    /// The frames' bytes one after another, in one allocation (see ``Swift/Array/joinedBytes()``).
    public func joinedBytes() -> [UInt8] {
        joinedFrames(count) { index, body in withUnsafeBytes(ofFrame: index, body) }
    }

    /// The same bytes in a ``JoinedFrames`` (see ``Swift/Array/joined()``).
    public func joined() -> JoinedFrames {
        JoinedFrames.make(count) { index, body in withUnsafeBytes(ofFrame: index, body) }
    }

    /// Every frame as a ``Frame`` of its own.
    public func frames() -> [Frame] { (0..<count).map(frame) }

    /// Lets go of the frames' bytes, and so of libzmq's receive buffer they share: libzmq reuses
    /// a buffer for the next batch it reads only when no message holds a share of it, and makes a
    /// new one otherwise (a backlog of those grew a broker's memory by a third).
    public func release() {
        for index in 0..<count {
            zmq_msg_close(messages + index)
            zmq_msg_init(messages + index)
        }
        if isOverlong {
            zmq_msg_close(overflow)
            zmq_msg_init(overflow)
        }
        state.pointee = (0, false)
    }

    /// Receives the next message from `handle` into the kept messages; false when none waits.
    func receive(from handle: UnsafeMutableRawPointer, type: SocketType) throws(ZMQError) -> Bool {
        state.pointee = (0, false)
        var flags = ZMQ_DONTWAIT
        while true {
            let target = count < capacity ? messages + count : overflow
            if zmq_msg_recv(target, handle, flags) < 0 {
                let error = zmq_errno()
                if error == EINTR { continue }
                if error == EAGAIN && flags == ZMQ_DONTWAIT && count == 0 { return false }
                throw ZMQError(.init(rawValue: error), operation: "zmq_msg_recv(\(type))")
            }
            if count < capacity { state.pointee.count += 1 } else { state.pointee.isOverlong = true }
            guard zmq_msg_more(target) == 1 else { return true }
            // A multipart message arrives whole: its other frames are there already.
            flags = 0
        }
    }
}

extension Socket {
    /// Receives the next whole message into `message`, replacing what it held, if one is waiting;
    /// false otherwise. Frames past its capacity are read and dropped (``ReceivedMessage/isOverlong``).
    public func tryReceive(into message: ReceivedMessage) throws(ZMQError) -> Bool {
        let handle = try open("zmq_msg_recv(\(type))")
        defer { wakeOtherWaiters() }
        guard try message.receive(from: handle, type: type) else {
            emptyReceives &+= 1
            return false
        }
        return true
    }

    /// Sends frame `index` of `message` (its bytes shared, not copied) if libzmq can queue it now;
    /// false otherwise.
    public func trySend(frame index: Int, of message: ReceivedMessage, more: Bool = false) throws(ZMQError) -> Bool {
        precondition(index < message.count, "frame \(index) of a message of \(message.count)")
        return try sendSharing(message.messages + index, flags: ZMQ_DONTWAIT | (more ? ZMQ_SNDMORE : 0))
    }

    /// Sends frame `index` of `message` itself, if libzmq can queue it now: the frame's share of
    /// the bytes is handed over rather than shared (no `zmq_msg_copy` to make and close), and the
    /// frame reads empty until the next receive. For a frame's last send; false, the frame kept, otherwise.
    public func trySend(handingOver index: Int, of message: ReceivedMessage, more: Bool = false) throws(ZMQError) -> Bool {
        precondition(index < message.count, "frame \(index) of a message of \(message.count)")
        return try sendHandingOver(message.messages + index, flags: ZMQ_DONTWAIT | (more ? ZMQ_SNDMORE : 0))
    }
}
