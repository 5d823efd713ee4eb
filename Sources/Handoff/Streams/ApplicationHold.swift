/// The application's hold on a stream pair: shared by the ``ContinuationInputStream`` and
/// ``ContinuationOutputStream`` the node handed out (and so by every ``ContinuationStreams`` and
/// iterator made of them). When the last of them goes, the application can neither read nor write
/// the pair again, and the node is told (``Node/applicationLetGo(_:generation:)``): it ends an
/// output left untouched as an empty stream and cancels anything else left unfinished
/// (``StreamPair/applicationLetGo(readerTook:written:emptyEnd:now:)``). Without it a continuing
/// node that read everything of a pair opened both ways and never finished its own direction (the
/// plainest use: `try await streams.input.readAll()`) left the pair open on both nodes for good,
/// and its fifth was refused by the originator, at its limit per peer.
final class ApplicationHold: Sendable {
    private let node: Node
    private let key: StreamKey
    /// Which of the pair's holds this is: a node hands out a new one once the last is gone, and a
    /// late word of an old one must not end the pair the new one holds.
    let generation: Int

    init(node: Node, key: StreamKey, generation: Int) {
        self.node = node
        self.key = key
        self.generation = generation
    }

    deinit {
        let (node, key, generation) = (node, key, generation)
        // A deinit cannot wait on the node's actor: the news goes in a task of its own.
        Task { await node.applicationLetGo(key, generation: generation) }
    }
}
