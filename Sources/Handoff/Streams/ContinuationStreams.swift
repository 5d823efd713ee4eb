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
///
/// Once the application holds none of the pair's handles (this value, its ``input``, its
/// ``output``), the node ends what it left unfinished: an output never written to as an empty
/// stream, one written to without ``ContinuationOutputStream/finish()`` by a cancel; bytes that
/// arrived unread cancel the pair too.
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

    /// What the node shares with the application's reader: the queue, the counter, the checksum.
    let side: StreamReadingSide
    /// The application's hold on the pair: when the last of its handles goes, the node finishes
    /// or cancels what the application left (``ApplicationHold``).
    let hold: ApplicationHold

    init(side: StreamReadingSide, hold: ApplicationHold) {
        self.side = side
        self.hold = hold
    }

    var node: Node { side.node }
    var key: StreamKey { side.key }
    /// Whether anything can arrive (a pair opened one way has an empty, ended input on one side).
    var enabled: Bool { side.enabled }

    /// Bytes received so far, and the total when the writer has said.
    public var progress: StreamProgress { side.counter.progress }

    public func makeAsyncIterator() -> Iterator {
        Iterator(
            stream: self, received: ReceivedBytes(checksum: side.writerChecksum),
            stopped: side.enabled ? StoppedReaderSignal(node: side.node, key: side.key, counter: side.counter) : nil)
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
            guard let event = await stream.side.events.next(isolation: actor) else {
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
                stream.side.counter.bytes.store(received.count, ordering: .relaxed)
                unacknowledged += 1
                if unacknowledged >= stream.side.creditBatch {
                    let granted = unacknowledged
                    unacknowledged = 0
                    await stream.node.streamConsumed(stream.key, chunks: granted)
                }
                return chunk
            case .end(let total, let expected):
                finished = true
                stopped?.directionEnded()
                try received.verifyEnd(total: total, checksum: expected)
                stream.side.counter.setTotal(total)
                return nil
            case .failed(let error):
                finished = true
                stopped?.directionEnded()
                throw error
            }
        }
    }
}
