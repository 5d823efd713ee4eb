import Synchronization

/// Held by a stream's iterator (``ContinuationInputStream/Iterator``): dropped before its direction
/// ended (the reader left its loop, or its task was cancelled), it tells the node that the reader
/// stopped, so that the peer's writer is not left waiting for credit that will never come
/// (``StreamPair/readerStopped(after:now:)``).
///
/// A class because an iterator is a value the application copies and drops as it likes; the
/// signal goes when the last copy does.
final class StoppedReaderSignal: Sendable {
    private let node: Node
    private let key: StreamKey
    private let counter: ProgressCounter
    private let ended = Atomic<Bool>(false)

    init(node: Node, key: StreamKey, counter: ProgressCounter) {
        self.node = node
        self.key = key
        self.counter = counter
    }

    /// The direction came to its end, or failed: the reader has nothing to tell.
    func directionEnded() { ended.store(true, ordering: .relaxed) }

    deinit {
        guard !ended.load(ordering: .relaxed) else { return }
        let (node, key, bytes) = (node, key, counter.bytes.load(ordering: .relaxed))
        // A deinit cannot wait on the node's actor: the news goes in a task of its own.
        Task { await node.streamReaderStopped(key, after: bytes) }
    }
}
