import Foundation
import Synchronization
import ZeroMQ

/// What a pair's node shares with the application's writer (``ContinuationOutputStream``): where
/// the written bytes have come to, their checksum so far, whether the end was written. Held by the
/// node's ``StreamSession`` for the pair's life; the application's ``ContinuationOutputStream`` is a
/// handle on it, so that the node can tell when the application has let go of the pair
/// (``ApplicationHold``) and a handle handed out again continues where the last left off.
final class StreamWritingSide: Sendable {
    let node: Node
    let key: StreamKey
    /// Whether this side writes at all (a pair opened one way has a closed output on one side).
    let enabled: Bool
    private let chunkSizeStorage: Atomic<Int>
    /// Largest chunk sent: at most the size the reader accepts.
    var chunkSize: Int { chunkSizeStorage.load(ordering: .relaxed) }
    let counter = ProgressCounter()

    private struct State {
        var offset: UInt64 = 0
        var digest: StreamDigest
        var finished = false
        var expectedLength: UInt64?
    }
    private let state: Mutex<State>

    /// `checksum`: what this side's open announced its end will carry.
    init(node: Node, key: StreamKey, chunkSize: Int, enabled: Bool, checksum: StreamChecksum) {
        self.node = node
        self.key = key
        self.enabled = enabled
        chunkSizeStorage = Atomic(chunkSize)
        state = Mutex(State(digest: StreamDigest(checksum)))
    }

    /// Set once the peer said which chunk size it accepts.
    func setChunkSize(_ size: Int) { chunkSizeStorage.store(max(1, size), ordering: .relaxed) }

    /// The total the writer will send, when known: set it before writing so the reader can show progress.
    var expectedLength: UInt64? {
        get { state.withLock { $0.expectedLength } }
        set {
            state.withLock { $0.expectedLength = newValue }
            if let newValue { counter.setTotal(newValue) }
        }
    }

    /// Bytes written so far, and the expected total when set.
    var progress: StreamProgress { counter.progress }

    /// Writes bytes, suspending while the reader's window is full.
    ///
    /// - Throws: ``HandoffError``: ``HandoffError/Code-swift.struct/streamCancelled``,
    ///   ``HandoffError/Code-swift.struct/peerLost``, ``HandoffError/Code-swift.struct/remoteApplicationTimedOut``
    ///   (a stall timeout), or a write after ``finish()``.
    nonisolated(nonsending)
    func write(_ bytes: some ContiguousBytes) async throws(HandoffError) {
        let count = bytes.withUnsafeBytes { $0.count }
        let chunkSize = self.chunkSize
        var start = 0
        while start < count {
            let end = min(start + chunkSize, count)
            let (offset, total, previous) = try state.withLock { (state) throws(HandoffError) -> (UInt64, UInt64?, StreamDigest) in
                guard !state.finished else {
                    throw HandoffError(.streamCancelled, "write after finish(): the stream is already complete")
                }
                return (state.offset, state.expectedLength, state.digest)
            }
            var digest = previous
            // Copy into libzmq's buffer and checksum (CRC-32C: in the same pass).
            let chunk: Frame = bytes.withUnsafeBytes { all in
                let slice = UnsafeRawBufferPointer(rebasing: all[start..<end])
                return Frame(count: slice.count) { destination in
                    digest.copy(slice, to: destination.baseAddress!)
                }
            }
            state.withLock { state in
                state.digest = digest
                state.offset = offset + UInt64(chunk.count)
            }
            try await node.sendStreamData(key, chunk: chunk, offset: offset, total: total)
            counter.bytes.store(offset + UInt64(chunk.count), ordering: .relaxed)
            start = end
        }
    }

    /// Ends this direction: sends the total length and checksum. Further writes fail. On an
    /// output the pair's direction closed (``StreamDirection``), it does nothing.
    func finish() async throws(HandoffError) {
        guard enabled else { return }
        let (total, checksum) = try state.withLock { (state) throws(HandoffError) -> (UInt64, StreamEndChecksum) in
            guard !state.finished else { throw HandoffError(.streamCancelled, "finish() called twice") }
            state.finished = true
            // A writer's digest is made from the algorithm its open announced: it always has one.
            return (state.offset, state.digest.checksum!)
        }
        counter.setTotal(total)
        try await node.sendStreamEnd(key, total: total, checksum: checksum)
    }

    /// The application let go of the pair (``ApplicationHold``): how many bytes it wrote and, when
    /// it wrote none, never finished and promised none (``expectedLength``), the end of an empty
    /// stream, which this call makes final (a handle handed out later finds the output finished).
    func letGo() -> (written: UInt64, emptyEnd: StreamEndChecksum?) {
        state.withLock { state in
            guard enabled, !state.finished else { return (state.offset, nil) }
            guard state.offset == 0, (state.expectedLength ?? 0) == 0, let checksum = state.digest.checksum else { return (state.offset, nil) }
            state.finished = true
            return (0, checksum)
        }
    }
}
