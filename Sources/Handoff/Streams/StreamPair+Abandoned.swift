import Foundation
import HandoffWire

// A stream pair whose application stopped reading, or let go of the pair: what the peer would
// otherwise wait for for ever (credit no reader grants, an end no writer sends) is ended here.
extension StreamPair {
    /// The application's reader stopped before the peer's end (it left its loop, or its task was
    /// cancelled), having taken `bytes`. Nothing more of this direction will be read, so the peer's
    /// writer would wait for credit until a stall timeout, off by default, or for ever: the pair is
    /// cancelled, and the peer told how far the reader got.
    ///
    /// The whole pair, though this side may still write: the contract has no way to stop one
    /// direction alone, and waiting for this side to finish writing first deadlocks a pair whose
    /// readers both stop while both write, each writer waiting on the other's credit (found by the
    /// simulator, seed 9000155, when this waited for this side's end to be acknowledged).
    mutating func readerStopped(after bytes: UInt64, now: ContinuousClock.Instant) -> [Action] {
        guard reads, !endReceived, failure == nil else { return [] }
        return [.record(.readerStopped)] + cancel(
            telling: "the reader stopped after \(bytes) bytes, before the end",
            here: "its reader stopped after \(bytes) of the \(receivedOffset) bytes that arrived, before the end", now: now)
    }

    /// The application let go of the pair (``ApplicationHold``): it will neither read nor write it
    /// again. Its reader had taken `readerTook` bytes, its writer written `written`; `emptyEnd`, the
    /// end of an empty stream, when the writer wrote nothing and promised nothing.
    ///
    /// The writing half: a writer that wrote nothing ends its direction as an empty stream, as
    /// closing a file would; one that wrote bytes without finishing cannot finish them now, and the
    /// pair is cancelled (a reader never takes a stream cut short as whole).
    ///
    /// The reading half, never iterated (an iterator dropped early has stopped its reader already):
    /// bytes that arrived unread cancel the pair, as a reader that stopped would; with nothing
    /// arrived yet, the pair waits for the peer's end, and the first bytes that come instead
    /// cancel it (``abandoned``). So an originator whose delegate wrote its stream and returned
    /// without reading the other direction, which its peer never wrote, completes as usual when
    /// that peer lets go in turn: cancelling at once failed every such pair on both nodes,
    /// though each side had all it wanted.
    ///
    /// After this, this side's direction is ended or the pair cancelled, so its peer waits on
    /// nothing; and a pair both of whose applications let go completes.
    mutating func applicationLetGo(readerTook: UInt64, written: UInt64, emptyEnd: StreamEndChecksum?, now: ContinuousClock.Instant) -> [Action] {
        guard failure == nil else { return [] }
        var actions: [Action] = []
        if writes, end == nil {
            guard let emptyEnd, written == 0 else {
                return [.record(.letGo)] + cancel(telling: "the application let go of the stream after writing \(written) bytes, without finishing it", now: now)
            }
            actions += writeEnd(total: 0, checksum: emptyEnd, now: now)
        }
        guard reads, !endReceived else { return actions }
        if receivedOffset > readerTook {
            return actions + [.record(.letGo)] + cancel(telling: "the application let go of the stream with \(receivedOffset - readerTook) bytes unread", now: now)
        }
        abandoned = true
        return actions
    }

    /// Bytes arrived for an application that let go of the pair before any came (``abandoned``).
    mutating func arrivedAbandoned(_ count: Int, now: ContinuousClock.Instant) -> [Action] {
        [.record(.letGo)] + cancel(telling: "the application let go of the stream before any of it arrived: \(count) bytes will not be read", now: now)
    }

    /// Cancels the pair, telling the peer `reason` (and this side's application `here`, or the same):
    /// the application's own cancel (``Node/cancelStream(_:reason:)``) and the ones above.
    mutating func cancel(telling reason: String, here: String? = nil, now: ContinuousClock.Instant) -> [Action] {
        var cancel = WireStreamCancel()
        cancel.reason = reason
        let error = HandoffError(.streamCancelled, "the stream was cancelled here: \(here ?? reason)", activityType: activityType)
        return fail(error, telling: .cancel(cancel), now: now)
    }
}
