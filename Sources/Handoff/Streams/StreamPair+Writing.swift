import DequeModule
import Foundation
import HandoffWire
import ZeroMQ

// A stream pair's writing half: chunks under the peer's credit, what is kept for a resume, the end.
extension StreamPair {
    /// The application writes one chunk. The caller waits until ``writerMayProceed`` first; a chunk
    /// written past the credit, or after a failure, is not sent.
    mutating func write(_ chunk: SentChunk, now: ContinuousClock.Instant) -> [Action] {
        guard writes, failure == nil, writerMayProceed else { return [] }
        lastOwnStep = now
        return [transmit(chunk, now: now)]
    }

    /// The application ends its direction with the length and checksum of what it wrote (in the
    /// algorithm this side's open announced): the end is kept, and sent again after a resume, until
    /// the peer acknowledges it.
    mutating func writeEnd(total: UInt64, checksum: StreamEndChecksum, now: ContinuousClock.Instant) -> [Action] {
        guard writes, failure == nil, end == nil else { return [] }
        var end = WireStreamEnd()
        end.totalLength = total
        end.checksumAlgorithm = checksum.algorithm.wire
        end.checksum = checksum.value
        self.end = end
        endNeedsSending = true
        lastOwnStep = now
        return pump(now: now)
    }

    /// The peer granted credit and acknowledged what it has (a keep-alive grants none).
    mutating func creditArrived(_ credit: WireStreamCredit, now: ContinuousClock.Instant) -> [Action] {
        sendCredit += Int(credit.chunks)
        acknowledge(upTo: credit.acknowledgedOffset, endReceived: credit.endReceived, now: now)
        return pump(now: now) + completion()
    }

    private mutating func transmit(_ chunk: SentChunk, now: ContinuousClock.Instant) -> Action {
        var data = WireStreamData()
        data.offset = chunk.offset
        data.length = UInt32(chunk.frame.count)
        data.totalLength = chunk.total
        sendCredit -= 1
        retained.append(chunk)
        bytesSent += UInt64(chunk.frame.count)
        return send(.data(data), payload: chunk.frame, now: now)
    }

    /// Sends what a resume asked for again (within credit), then the end if it is due, and lets the
    /// writer go on when it may.
    mutating func pump(now: ContinuousClock.Instant) -> [Action] {
        guard failure == nil else { return [] }
        var actions: [Action] = []
        while sendCredit > 0, interruptedSince == nil, retained.count < Self.maxUnacknowledgedChunks, let chunk = resend.popFirst() {
            actions.append(transmit(chunk, now: now))
            bytesResent += UInt64(chunk.frame.count)
            actions.append(.record(.bytesResent(chunk.frame.count)))
        }
        if resend.isEmpty, endNeedsSending, interruptedSince == nil, let end {
            endNeedsSending = false
            actions.append(send(.end(end), now: now))
        }
        if writerMayProceed { actions.append(.wakeWriter) }
        return actions
    }

    /// The peer acknowledged bytes up to `offset` (and, maybe, the end): forget what it has.
    mutating func acknowledge(upTo offset: UInt64, endReceived: Bool, now: ContinuousClock.Instant) {
        while let first = retained.first, first.offset + UInt64(first.frame.count) <= offset {
            retained.removeFirst()
            lastProgress = now
        }
        if endReceived, end != nil {
            if !endAcknowledged { lastProgress = now }
            endAcknowledged = true
            retained.removeAll()
            resend.removeAll()
            endNeedsSending = false
        }
    }

    /// After a resume: everything from the peer's `receivedOffset` on is sent again, the end too.
    mutating func rewind(to receivedOffset: UInt64, credit: Int, endReceived: Bool, now: ContinuousClock.Instant) {
        acknowledge(upTo: receivedOffset, endReceived: endReceived, now: now)
        sendCredit = credit
        resend = Deque(retained.filter { $0.offset + UInt64($0.frame.count) > receivedOffset })
        retained.removeAll()
        if end != nil, !endAcknowledged { endNeedsSending = true }
    }
}
