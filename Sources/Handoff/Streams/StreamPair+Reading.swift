import Foundation
import HandoffWire

// A stream pair's reading half: offsets in order, the window granted, the end acknowledged.
extension StreamPair {
    /// What a chunk at `offset` of `count` bytes means for the reading half.
    enum Arrival: Equatable {
        /// New bytes: deliver the chunk from this index on (after a partial overlap, not 0).
        case deliver(from: Int)
        /// Bytes the reader already has (sent again after a resume): drop.
        case duplicate
        /// Beyond a gap the broken connection left, while this side waits for its resume to be
        /// answered: drop (the peer sends it again from what this side has).
        case aheadOfResume
        case violation(String)
    }

    func arrival(offset: UInt64, count: Int) -> Arrival {
        guard reads else { return .violation("data arrived on a direction the open excluded") }
        guard count <= ownChunkSize else {
            return .violation("a chunk of \(count) bytes is larger than the \(ownChunkSize) bytes agreed")
        }
        let end = offset + UInt64(count)
        if end <= receivedOffset || endReceived { return .duplicate }
        guard offset <= receivedOffset else {
            // An honest peer leaves a gap only when frames were lost with a connection: it wrote on
            // after the break, before this side's resume reached it (found by the simulator, seed
            // 55669103: a partition of 160 ms lost one chunk, and the next came before the
            // resume's answer). Once the answer is here, the peer rewound, and a gap is a lie.
            if interruptedSince != nil { return .aheadOfResume }
            return .violation("a chunk at offset \(offset) leaves a gap after the \(receivedOffset) bytes received")
        }
        guard creditOutstanding > 0 else {
            return .violation("the writer sent more chunks than the \(window)-chunk window it was granted")
        }
        return .deliver(from: Int(receivedOffset - offset))
    }

    /// A chunk arrived (its bytes: `chunk`).
    mutating func dataArrived(_ data: WireStreamData, chunk: Data, now: ContinuousClock.Instant) -> [Action] {
        switch arrival(offset: data.offset, count: chunk.count) {
        case .duplicate:
            return [.record(.duplicateBytesDropped(chunk.count))]
        case .aheadOfResume:
            return [.record(.droppedAheadOfResume(chunk.count))]
        case .violation(let reason):
            return violate(reason, now: now)
        case .deliver where abandoned:
            return arrivedAbandoned(chunk.count, now: now)
        case .deliver(let start):
            let fresh = start == 0 ? chunk : chunk.subdata(in: chunk.startIndex + start..<chunk.endIndex)
            creditOutstanding -= 1
            unconsumed += 1
            receivedOffset += UInt64(fresh.count)
            bytesArrived += UInt64(fresh.count)
            lastProgress = now
            var actions: [Action] = []
            if start > 0 { actions.append(.record(.duplicateBytesDropped(start))) }
            if data.totalLength > 0 { actions.append(.expectLength(data.totalLength)) }
            actions.append(.deliver(fresh))
            return actions
        }
    }

    /// The peer's end arrived (again, after a resume: acknowledged again, delivered once).
    ///
    /// An end that counts more bytes than arrived, while this side waits for its resume's answer,
    /// lies beyond a gap, and is dropped as a chunk there is (``arrival(offset:count:)``): the peer
    /// sends the missing bytes and the end again from what this side has (found by the simulator,
    /// seed 134620943: a chunk lost with a connection, the last chunk dropped beyond the gap, and
    /// the end that followed it taken as the stream's, 1,829 bytes short). Any other end goes to
    /// the reader, which holds it to what arrived (``ReceivedBytes``: a short stream is
    /// ``HandoffError/Code-swift.struct/streamTruncated``).
    mutating func endArrived(_ end: WireStreamEnd, now: ContinuousClock.Instant) -> [Action] {
        guard reads else { return violate("an end arrived on a direction the open excluded", now: now) }
        if !endReceived, end.totalLength > receivedOffset, interruptedSince != nil {
            return [.record(.endDroppedAheadOfResume(total: end.totalLength))]
        }
        var actions: [Action] = []
        if !endReceived {
            // The reader computed, as the bytes arrived, the algorithm the peer's open announced:
            // an end in another can be held to its length only.
            var checksum: StreamEndChecksum?
            if let algorithm = StreamChecksum(wire: end.checksumAlgorithm), algorithm == peerChecksum {
                checksum = StreamEndChecksum(algorithm: algorithm, value: end.checksum)
            } else {
                actions.append(.record(.endNotVerified(end.checksumAlgorithm, announced: peerChecksum, total: end.totalLength)))
                if requiresVerifiedEnd {
                    let announced = peerChecksum.map { "\($0)" } ?? "an algorithm this node does not know"
                    let error = HandoffError(
                        .streamChecksumMismatch,
                        "the end (\(end.totalLength) bytes) carries \(StreamChecksum.carried(end.checksumAlgorithm)), and the writer announced \(announced): this node requires every stream's bytes verified",
                        activityType: activityType)
                    return actions + fail(error, telling: .error(error.wire), now: now)
                }
            }
            endReceived = true
            actions.append(.deliverEnd(total: end.totalLength, checksum: checksum))
        }
        // Acknowledged, so that the writer may forget it.
        actions.append(send(.credit(acknowledgement()), now: now))
        return actions + completion()
    }

    /// The reader consumed `chunks`: they are granted back to the writer as credit.
    mutating func consumed(chunks: Int, now: ContinuousClock.Instant) -> [Action] {
        guard failure == nil else { return [] }
        unconsumed = max(0, unconsumed - chunks)
        lastOwnStep = now
        guard !endReceived else { return [] }
        creditOutstanding += chunks
        return [send(.credit(acknowledgement(chunks: chunks)), now: now)]
    }

    /// The credit granted on a resume: the window, less what the reader still holds.
    mutating func resumeGrant() -> Int {
        creditOutstanding = max(0, window - unconsumed)
        return creditOutstanding
    }
}
