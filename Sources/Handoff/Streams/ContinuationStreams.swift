import Foundation
import Synchronization
import ZeroMQ

/// How far one direction of a continuation stream has come.
public struct StreamProgress: Hashable, Sendable, CustomStringConvertible {
    public init(bytes: UInt64, total: UInt64?) {
        self.bytes = bytes
        self.total = total
    }

    /// Bytes moved so far.
    public let bytes: UInt64
    /// The stream's total length, when its writer has said.
    public let total: UInt64?

    /// `bytes / total`, when the total is known.
    public var fractionCompleted: Double? {
        guard let total, total > 0 else { return total == 0 ? 1 : nil }
        return Double(bytes) / Double(total)
    }

    public var description: String {
        if let total { "\(bytes) of \(total) bytes" } else { "\(bytes) bytes" }
    }
}

/// Shared counters of one direction of a stream, readable from any task.
final class ProgressCounter: Sendable {
    let bytes = Atomic<UInt64>(0)
    /// 0 while unknown; otherwise the total + 1 (so that an empty stream's 0 is representable).
    let totalPlusOne = Atomic<UInt64>(0)

    var progress: StreamProgress {
        let total = totalPlusOne.load(ordering: .relaxed)
        return StreamProgress(bytes: bytes.load(ordering: .relaxed), total: total == 0 ? nil : total - 1)
    }

    func setTotal(_ total: UInt64) { totalPlusOne.store(total + 1, ordering: .relaxed) }
}

/// A pair of continuation streams between a continuing node and an activity's originator — Apple's
/// `getContinuationStreams` / `userActivity(_:didReceive:outputStream:)`, over ZeroMQ.
///
/// Both ends get a pair: what one side writes to its ``output``, the other reads from its ``input``.
/// Bytes flow under credit-based flow control (a window of chunks in flight), so memory stays
/// bounded whatever the size of the stream; each direction ends with its total length and a checksum
/// (CRC-32C unless ``Node/Configuration/streamChecksum`` says otherwise), and a reader never sees a
/// truncated or corrupted stream finish normally.
public struct ContinuationStreams: Sendable {
    /// The stream pair's id (chosen by the continuing node).
    public let id: UInt64
    /// The activity the streams belong to.
    public let activityID: String
    /// Bytes from the other side.
    public let input: ContinuationInputStream
    /// Bytes to the other side.
    public let output: ContinuationOutputStream

    /// Abandons both directions; the other side's reads and writes fail with
    /// ``HandoffError/Code-swift.struct/streamCancelled``.
    public func cancel(reason: String = "cancelled") async {
        await input.node.cancelStream(input.key, reason: reason)
    }
}

/// What arrives on one direction of a stream, in order.
enum StreamEvent: Sendable {
    case data(Data)
    case end(total: UInt64, checksum: StreamEndChecksum?)
    case failed(HandoffError)
}

/// Bytes from the other side of a continuation stream, as an `AsyncSequence` of chunks.
///
/// ```swift
/// for try await chunk in streams.input { file.write(chunk) }   // or:
/// let everything = try await streams.input.readAll()
/// ```
///
/// Iterate it once, from one task. Chunks are handed over without copying. Iteration throws a
/// ``HandoffError`` when the stream fails: ``HandoffError/Code-swift.struct/streamTruncated`` or
/// ``HandoffError/Code-swift.struct/streamChecksumMismatch`` when the bytes do not add up at the end,
/// ``HandoffError/Code-swift.struct/streamCancelled`` (by either side, or the reading task
/// cancelled), ``HandoffError/Code-swift.struct/peerLost``,
/// ``HandoffError/Code-swift.struct/remoteApplicationTimedOut`` (a stall timeout given up on, here or
/// by the peer: `details["scope"] == "stalled"`).
///
/// A reader that stops before the end (it leaves its loop, or its task is cancelled) cancels the
/// pair: the other side's writes throw ``HandoffError/Code-swift.struct/streamCancelled`` instead of
/// waiting for credit that would never come, and so do this side's, if it still writes (a pair is
/// one conversation: read to the end to go on writing).
public final class ContinuationInputStream: AsyncSequence, Sendable {
    public typealias Element = Data
    public typealias Failure = HandoffError

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
    private let writerChecksum = Mutex<StreamChecksum?>(.crc32c)

    init(node: Node, key: StreamKey, events: StreamInbox, window: Int, enabled: Bool) {
        self.node = node
        self.key = key
        self.events = events
        self.enabled = enabled
        creditBatch = Swift.max(1, window / 4)
    }

    /// Bytes received so far, and the total when the writer has said.
    public var progress: StreamProgress { counter.progress }

    /// Set from the peer's open, before the application has the stream.
    func setWriterChecksum(_ checksum: StreamChecksum?) { writerChecksum.withLock { $0 = checksum } }

    public func makeAsyncIterator() -> Iterator {
        Iterator(
            stream: self, received: ReceivedBytes(checksum: writerChecksum.withLock { $0 }),
            stopped: enabled ? StoppedReaderSignal(node: node, key: key, counter: counter) : nil)
    }

    /// Reads the whole stream.
    ///
    /// - Parameter limit: The most bytes to accept; a longer stream is cancelled.
    /// - Returns: Every byte, once the end arrived and its length and checksum were verified.
    /// - Throws: ``HandoffError``; with ``HandoffError/Code-swift.struct/streamCancelled`` past `limit`.
    public func readAll(limit: Int = .max) async throws(HandoffError) -> Data {
        var result = Data()
        var iterator = makeAsyncIterator()
        while let chunk = try await iterator.next() {
            guard result.count + chunk.count <= limit else {
                await node.cancelStream(key, reason: "more than \(limit) bytes")
                throw HandoffError(.streamCancelled, "the stream is longer than the \(limit)-byte limit")
            }
            result.append(chunk)
        }
        return result
    }

    public struct Iterator: AsyncIteratorProtocol {
        let stream: ContinuationInputStream
        var received: ReceivedBytes
        /// Tells the node if the iterator is dropped before the end (a reader that stopped).
        let stopped: StoppedReaderSignal?
        var unacknowledged = 0
        var finished = false

        public mutating func next() async throws(HandoffError) -> Data? {
            try await next(isolation: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(HandoffError) -> Data? {
            guard !finished else { return nil }
            guard let event = await stream.events.next(isolation: actor) else {
                finished = true
                if Task.isCancelled {
                    throw HandoffError(.streamCancelled, "the reading task was cancelled after \(received.count) bytes")
                }
                stopped?.directionEnded()
                throw HandoffError(.streamTruncated, "the stream stopped after \(received.count) bytes without an end")
            }
            switch event {
            case .data(let chunk):
                received.absorb(chunk)
                stream.counter.bytes.store(received.count, ordering: .relaxed)
                unacknowledged += 1
                if unacknowledged >= stream.creditBatch {
                    let granted = unacknowledged
                    unacknowledged = 0
                    await stream.node.streamConsumed(stream.key, chunks: granted)
                }
                return chunk
            case .end(let total, let expected):
                finished = true
                stopped?.directionEnded()
                try received.verifyEnd(total: total, checksum: expected)
                stream.counter.setTotal(total)
                return nil
            case .failed(let error):
                finished = true
                stopped?.directionEnded()
                throw error
            }
        }
    }
}

/// Bytes to the other side of a continuation stream.
///
/// ```swift
/// streams.output.expectedLength = UInt64(payload.count)   // optional: lets the reader show progress
/// try await streams.output.write(payload)                  // suspends while the reader is behind
/// try await streams.output.finish()                        // sends length and checksum
/// ```
///
/// Write from one task at a time. Writes are cut into chunks and suspend when the reader's window is
/// full, so memory stays bounded however much is written.
public final class ContinuationOutputStream: Sendable {
    let node: Node
    let key: StreamKey
    /// Whether this side writes at all (a pair opened one way has a closed output on one side).
    let enabled: Bool
    private let chunkSizeStorage: Atomic<Int>
    /// Largest chunk sent: at most the size the reader accepts.
    public var chunkSize: Int { chunkSizeStorage.load(ordering: .relaxed) }
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
    public var expectedLength: UInt64? {
        get { state.withLock { $0.expectedLength } }
        set {
            state.withLock { $0.expectedLength = newValue }
            if let newValue { counter.setTotal(newValue) }
        }
    }

    /// Bytes written so far, and the expected total when set.
    public var progress: StreamProgress { counter.progress }

    /// Writes bytes, suspending while the reader's window is full.
    ///
    /// - Throws: ``HandoffError``: ``HandoffError/Code-swift.struct/streamCancelled``,
    ///   ``HandoffError/Code-swift.struct/peerLost``, ``HandoffError/Code-swift.struct/remoteApplicationTimedOut``
    ///   (a stall timeout), or a write after ``finish()``.
    nonisolated(nonsending)
    public func write(_ bytes: some ContiguousBytes) async throws(HandoffError) {
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
    public func finish() async throws(HandoffError) {
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
}
