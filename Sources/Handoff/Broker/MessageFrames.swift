import ZeroMQ

/// The frames of one message as the broker's rules read them, in place, and as its loop passes
/// them on: an array of ``Frame``s (tests, the simulator, the rarer paths), or a
/// ``ZeroMQ/ReceivedMessage`` (the loop's hot path, which allocates nothing per message).
///
/// The rules never keep a message past the call: what the cache keeps it copies.
protocol MessageFrames {
    var frameCount: Int { get }
    func size(ofFrame index: Int) -> Int
    func withBytes<R>(ofFrame index: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R
    /// Sends frame `index` on `socket`, its bytes shared; false when the socket would block.
    func trySend(frame index: Int, on socket: Socket, more: Bool) throws(ZMQError) -> Bool
    /// The same, where nothing reads or sends frame `index` again: a received message hands the
    /// frame itself over (``ZeroMQ/Socket/trySend(handingOver:of:more:)``); others share it.
    func trySendLast(frame index: Int, on socket: Socket, more: Bool) throws(ZMQError) -> Bool
    /// Frame `index` as a ``Frame`` of its own (shared bytes), for what keeps or re-sends it.
    func frame(_ index: Int) -> Frame
    /// The frames' bytes one after another, in one allocation: what the cache keeps.
    func joined() -> JoinedFrames
}

extension MessageFrames {
    /// Frames that have nothing to hand over share them on their last send too.
    func trySendLast(frame index: Int, on socket: Socket, more: Bool) throws(ZMQError) -> Bool {
        try trySend(frame: index, on: socket, more: more)
    }

    /// The frames' bytes together.
    var totalSize: Int {
        var size = 0
        for index in 0..<frameCount { size += self.size(ofFrame: index) }
        return size
    }

    /// Whether frame `index` exists and begins with `prefix`.
    func frame(_ index: Int, startsWith prefix: [UInt8]) -> Bool {
        index < frameCount && withBytes(ofFrame: index) { $0.starts(with: prefix) }
    }
}

extension Array: MessageFrames where Element == Frame {
    var frameCount: Int { count }
    func size(ofFrame index: Int) -> Int { self[index].count }
    func withBytes<R>(ofFrame index: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R { self[index].withUnsafeBytes(body) }
    func trySend(frame index: Int, on socket: Socket, more: Bool) throws(ZMQError) -> Bool {
        try socket.trySend(self[index], more: more)
    }
    func frame(_ index: Int) -> Frame { self[index] }
}

extension ReceivedMessage: MessageFrames {
    var frameCount: Int { count }
    func withBytes<R>(ofFrame index: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R { withUnsafeBytes(ofFrame: index, body) }
    func trySend(frame index: Int, on socket: Socket, more: Bool) throws(ZMQError) -> Bool {
        try socket.trySend(frame: index, of: self, more: more)
    }
    func trySendLast(frame index: Int, on socket: Socket, more: Bool) throws(ZMQError) -> Bool {
        try socket.trySend(handingOver: index, of: self, more: more)
    }
}
