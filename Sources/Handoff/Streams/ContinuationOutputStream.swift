import Foundation

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
    /// What the node shares with the application's writer: offset, checksum, end.
    let side: StreamWritingSide
    /// The application's hold on the pair (``ApplicationHold``).
    let hold: ApplicationHold

    init(side: StreamWritingSide, hold: ApplicationHold) {
        self.side = side
        self.hold = hold
    }

    /// Whether this side writes at all (a pair opened one way has a closed output on one side).
    var enabled: Bool { side.enabled }

    /// Largest chunk sent: at most the size the reader accepts.
    public var chunkSize: Int { side.chunkSize }

    /// The total the writer will send, when known: set it before writing so the reader can show progress.
    public var expectedLength: UInt64? {
        get { side.expectedLength }
        set { side.expectedLength = newValue }
    }

    /// Bytes written so far, and the expected total when set.
    public var progress: StreamProgress { side.progress }

    /// Writes bytes, suspending while the reader's window is full.
    ///
    /// - Throws: ``HandoffError``: ``HandoffError/Code-swift.struct/streamCancelled``,
    ///   ``HandoffError/Code-swift.struct/peerLost``, ``HandoffError/Code-swift.struct/remoteApplicationTimedOut``
    ///   (a stall timeout), or a write after ``finish()``.
    nonisolated(nonsending)
    public func write(_ bytes: some ContiguousBytes) async throws(HandoffError) {
        try await side.write(bytes)
    }

    /// Ends this direction: sends the total length and checksum. Further writes fail. On an
    /// output the pair's direction closed (``StreamDirection``), it does nothing.
    public func finish() async throws(HandoffError) {
        try await side.finish()
    }
}
