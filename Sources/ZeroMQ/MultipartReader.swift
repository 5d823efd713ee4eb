/// Reads whole multipart messages from a socket without ever waiting, for an event loop that polls,
/// and drops, frame by frame, any message longer than ``maxFrames``, so that what the owner holds
/// of one message is bounded by what it expects.
///
/// (libzmq makes a message readable only once all its frames are in, so the frames of a readable
/// message are all there. Until then libzmq itself holds them: ZMQ_MAXMSGSIZE limits each frame,
/// and the high-water mark counts whole messages, so an endless message from a peer is bounded
/// only by that peer's connection being dropped — a limit of libzmq 4.3 that no option closes.)
public struct MultipartReader {
    /// What one call found.
    public enum Step {
        /// Nothing complete is waiting.
        case none
        /// A whole message.
        case message([Frame])
        /// A message of more than ``maxFrames`` frames ended, dropped.
        case dropped
    }

    /// The most frames a message may have.
    public let maxFrames: Int
    private var frames: [Frame] = []
    private var discarding = false

    public init(maxFrames: Int) {
        precondition(maxFrames > 0)
        self.maxFrames = maxFrames
    }

    /// Reads frames that are waiting until a message is complete (or dropped), or none are left.
    public mutating func next(from socket: Socket) throws(ZMQError) -> Step {
        while let frame = try socket.tryReceive() {
            if discarding {
                if !frame.hasMore {
                    discarding = false
                    return .dropped
                }
                continue
            }
            frames.append(frame)
            if !frame.hasMore {
                defer { frames = [] }
                return .message(frames)
            }
            if frames.count >= maxFrames {
                frames = []
                discarding = true
            }
        }
        return .none
    }
}
