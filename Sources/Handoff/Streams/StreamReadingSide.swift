import Synchronization

/// What a pair's node shares with the application's reader (``ContinuationInputStream``): the
/// queue the node fills, the progress counter it reads on each tick, the checksum the writer
/// announced. Held by the node's ``StreamSession`` for the pair's life; the application's
/// ``ContinuationInputStream`` is a handle on it, so that the node can tell when the application
/// has let go of the pair (``ApplicationHold``).
final class StreamReadingSide: Sendable {
    let node: Node
    let key: StreamKey
    let events: StreamInbox
    /// Chunks consumed between two credit grants to the writer.
    let creditBatch: Int
    let counter = ProgressCounter()
    /// Whether anything can arrive (a pair opened one way has an empty, ended input on one side).
    let enabled: Bool
    /// The checksum the writer announced it ends with, set when the pair opens (`nil`: one this
    /// side does not compute).
    private let announcedChecksum = Mutex<StreamChecksum?>(.crc32c)

    init(node: Node, key: StreamKey, events: StreamInbox, window: Int, enabled: Bool) {
        self.node = node
        self.key = key
        self.events = events
        self.enabled = enabled
        creditBatch = Swift.max(1, window / 4)
    }

    var writerChecksum: StreamChecksum? { announcedChecksum.withLock { $0 } }

    /// Set from the peer's open, before the application has the stream.
    func setWriterChecksum(_ checksum: StreamChecksum?) { announcedChecksum.withLock { $0 = checksum } }
}
