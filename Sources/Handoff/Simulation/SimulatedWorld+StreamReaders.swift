import Foundation
import HandoffWire

// Continuation streams in the simulated world: the reading applications, the ticks and the
// broken connections that drive each end's liveness.
extension SimulatedWorld {
    /// A reading application got bytes: they must be the writer's, in order.
    func readerReceived(_ stream: SimulatedStream, _ side: Side, _ bytes: Data) {
        let offset = stream[side]!.received
        if stream.corrupted == nil, !bytes.elementsEqual(stream.content(offset..<offset + bytes.count)) {
            // A lying originator's bytes are read as they come; the end must catch them.
            if stream.lie != nil, side == .continuer {
                stream.liedBytesRead = true
            } else {
                stream.corrupted = "the \(side) side's reader got \(bytes.count) bytes at offset \(offset) that the writer did not write there"
            }
        }
        stream[side]!.read.absorb(bytes)
        stream[side]!.held += 1
        read(stream, side)
    }

    /// The writer's end arrived: what the reader got must be whole. The reader verifies the
    /// length and checksum the end carries as ``ContinuationInputStream`` does (``ReceivedBytes``),
    /// and the end must be the writer's own: all of its content, with its checksum.
    func readerEnded(_ stream: SimulatedStream, _ side: Side, total: UInt64, checksum: StreamEndChecksum?) {
        let read = stream[side]!.read
        var refused: String?
        do throws(HandoffError) { try read.verifyEnd(total: total, checksum: checksum) } catch {
            refused = error.message
            // A lie caught: the reading application gets this typed error, as ContinuationInputStream throws it.
            if let lie = stream.lie, side == .continuer {
                stream[side]!.failure = error
                stream.lieCaught = true
                log("\(nodes[stream[side]!.node].id): stream \(stream.number)'s reader caught the originator's lie (it \(lie)): \(error.code): \(error.message)")
                return
            }
        }
        // A writer that let go before writing ended its direction as an empty stream.
        let empty = stream.endDo(side.other, { $0.wroteEmpty }) == true
        let written = stream.checksum(writtenBy: side.other, empty: empty)
        guard refused == nil, !stream.liedBytesRead || side != .continuer, read.count == UInt64(empty ? 0 : stream.bytes), checksum == written else {
            stream.corrupted = stream.corrupted ?? "the \(side) side's reader got an end of \(total) bytes, checksum \(checksum.map(String.init(describing:)) ?? "none"), after \(read.count) bytes (\(read.checksum.map(String.init(describing:)) ?? "none computed")\(refused.map { "; \($0)" } ?? "")); the writer wrote \(stream.bytes) bytes, \(written)"
            return
        }
        stream[side]!.readWhole = true
    }

    /// The reading application reads what it holds, as its kind reads: the chunks it read are
    /// granted back to the writer in batches of a quarter window, as ``ContinuationInputStream`` does.
    func read(_ stream: SimulatedStream, _ side: Side) {
        guard endAlive(stream, side), stream.pairDo(side, { $0.isLive }), stream[side]!.held > 0 else { return }
        switch stream.reader {
        case .prompt:
            consume(stream, side, chunks: stream[side]!.held)
        case .slow(let delay):
            guard !stream[side]!.readScheduled else { return }
            stream[side]!.readScheduled = true
            schedule(.streamRead(stream: stream.number, side: side), at: now + delay)
        case .pauses(let atByte, let pause):
            if stream[side]!.pausedUntil == nil, stream[side]!.received >= atByte {
                stream[side]!.pausedUntil = now + pause
                log("\(nodes[stream[side]!.node].id): stream \(stream.number)'s reader pauses for \(pause)")
                schedule(.streamRead(stream: stream.number, side: side), at: now + pause)
            }
            if let until = stream[side]!.pausedUntil, now < until { return }
            consume(stream, side, chunks: stream[side]!.held)
        case .cancels(let atByte):
            guard stream[side]!.received >= atByte else {
                consume(stream, side, chunks: stream[side]!.held)
                return
            }
            perform(stream, side, stream.pairDo(side) { $0.cancel(telling: "the reader had enough", now: instant) })
        case .stops(let atByte):
            guard stream[side]!.received >= atByte else {
                consume(stream, side, chunks: stream[side]!.held)
                return
            }
            // The iterator is dropped: what it holds is never read, nor granted back. Once: the
            // pair then fails, and a failed pair's reader is not asked to read again (above); or
            // its end had come, after which nothing more is delivered.
            let taken = UInt64(stream[side]!.received)
            log("\(nodes[stream[side]!.node].id): stream \(stream.number)'s reader stops after \(taken) bytes")
            perform(stream, side, stream.pairDo(side) { $0.readerStopped(after: taken, now: instant) })
        case .letsGo(let atByte):
            // At byte 0 the originating application lets go as the pair opens, and the continuing
            // one reads (and writes) on: what it writes arrives at a pair let go before any did.
            guard atByte > 0, stream[side]!.received >= atByte else {
                consume(stream, side, chunks: stream[side]!.held)
                return
            }
            letGo(stream, side)
        }
    }

    /// The application lets go of the pair at `side` (``SimulatedStream/Reader/letsGo(atByte:)``):
    /// an iterator that took bytes stopped first (its signal reaches the node first), then the node
    /// ends what the application left, as ``Node`` does when the last handle goes.
    func letGo(_ stream: SimulatedStream, _ side: Side) {
        guard endAlive(stream, side), !stream[side]!.letGo else { return }
        stream[side]!.letGo = true
        let (received, written, endWritten) = (stream[side]!.received, stream[side]!.written, stream[side]!.endWritten)
        log("\(nodes[stream[side]!.node].id): stream \(stream.number)'s application lets go after reading \(received) bytes and writing \(written)")
        if received > 0 {
            perform(stream, side, stream.pairDo(side) { $0.readerStopped(after: UInt64(received), now: instant) })
        }
        var emptyEnd: StreamEndChecksum?
        if written == 0, !endWritten, stream[side]!.pair.writes {
            emptyEnd = stream.checksum(writtenBy: side, empty: true)
            stream[side]!.wroteEmpty = true
            stream[side]!.endWritten = true
        }
        perform(stream, side, stream.pairDo(side) {
            $0.applicationLetGo(readerTook: UInt64(received), written: UInt64(written), emptyEnd: emptyEnd, now: instant)
        })
    }

    /// A slow or pausing reader's next read.
    func readLater(_ stream: SimulatedStream, _ side: Side) {
        guard endAlive(stream, side) else { return }
        stream[side]!.readScheduled = false
        if case .slow = stream.reader, stream[side]!.held > 0 {
            consume(stream, side, chunks: 1)
            read(stream, side)
        } else {
            read(stream, side)
        }
        drive(stream)
    }

    private func consume(_ stream: SimulatedStream, _ side: Side, chunks: Int) {
        guard chunks > 0 else { return }
        stream[side]!.held -= chunks
        stream[side]!.ungranted += chunks
        if stream[side]!.held == 0 {
            // It took all that arrived, as the node sees from its reader's counter.
            let taken = UInt64(stream[side]!.received)
            stream.pairDo(side) { $0.readerTook(taken, now: instant) }
        }
        let batch = max(1, stream[side]!.pair.window / 4)
        guard stream[side]!.ungranted >= batch else { return }
        let granted = stream[side]!.ungranted
        stream[side]!.ungranted = 0
        perform(stream, side, stream.pairDo(side) { $0.consumed(chunks: granted, now: instant) })
    }

    // MARK: Events

    /// A stream event comes due: a frame arrives, a reader reads again, an open's wait ends.
    func handleStream(_ event: Event) {
        switch event {
        case .streamFrame(let number, let side, let epoch, let kind, let payload):
            let stream = streams[number]
            let (from, to) = (streamNode(stream, side.other), streamNode(stream, side))
            guard epoch == self.epoch(from: from, to: to), nodes[to].alive, readsNow(event, at: to) else { return }
            streamFrameArrives(stream, at: side, kind: kind, payload: payload)
        case .streamRead(let number, let side):
            guard let end = streams[number][side], nodes[end.node].alive, readsNow(event, at: end.node) else { return }
            readLater(streams[number], side)
        case .streamOpenTimeout(let number):
            guard let end = streams[number][.continuer], nodes[end.node].alive, readsNow(event, at: end.node) else { return }
            streamOpenTimedOut(streams[number])
        default:
            break
        }
    }

    // MARK: Liveness

    /// Node `index`'s tick: keep-alives, resumes and losses for its ends (``StreamPair/tick(now:limits:writerWaiting:)``).
    func tickStreams(at index: Int) {
        for stream in streams {
            let ticked = Side.allCases.filter { stream[$0]?.node == index && endHeld(stream, $0) }
            for side in ticked {
                // The writing application waits on credit while it has more to write.
                let writerWaiting = stream[side]!.written < stream.bytesToWrite && !stream.floods && !stream[side]!.letGo
                perform(stream, side, stream.pairDo(side) { $0.tick(now: instant, limits: stream.limits, writerWaiting: writerWaiting) })
            }
            if !ticked.isEmpty { drive(stream) }
        }
    }

    /// The connection between nodes `a` and `b` broke: a continuing side's DEALER tells its pairs
    /// (they wait to resume; an open still unanswered fails).
    func streamsDisconnected(_ a: Int, _ b: Int) {
        for stream in continuingEnds(between: a, b) {
            let unanswered = HandoffError(.connectionUnavailable, "the originator disconnected before answering the open")
            let (actions, _) = stream.pairDo(.continuer) { $0.connectionDropped(failingOpenWith: unanswered, now: instant) }
            perform(stream, .continuer, actions)
        }
    }

    /// The connection between nodes `a` and `b` is back: a continuing side's DEALER tells its pairs
    /// (an interrupted one asks to resume at once).
    func streamsReconnected(_ a: Int, _ b: Int) {
        // A stopped process reads the event when it goes on, and its tick resumes then.
        for stream in continuingEnds(between: a, b) where running(stream[.continuer]!.node) {
            perform(stream, .continuer, stream.pairDo(.continuer) { $0.connectionReturned(now: instant) })
        }
    }

    /// The streams whose continuing end is held on one of nodes `a` and `b` and whose originator
    /// is the other: the pairs that ride the DEALER between them.
    private func continuingEnds(between a: Int, _ b: Int) -> [SimulatedStream] {
        streams.filter { stream in
            guard endHeld(stream, .continuer) else { return false }
            let continuer = stream[.continuer]!.node, origin = streamOrigins[stream.number]
            return (continuer, origin) == (a, b) || (continuer, origin) == (b, a)
        }
    }

    /// Node `index` shuts down: each of its pairs fails, its peer told (`Node.failOutstanding`).
    func streamsShutDown(at index: Int) {
        for stream in streams {
            for side in Side.allCases where stream[side]?.node == index && endHeld(stream, side) {
                let notice = HandoffError(.peerLost, "\(nodes[index].id) shut down").wire
                perform(stream, side, stream.pairDo(side) { $0.fail(HandoffError(.notRunning, "the node shut down"), telling: .error(notice), now: instant) })
            }
        }
    }

    /// The open waited its time for an answer.
    func streamOpenTimedOut(_ stream: SimulatedStream) {
        guard endAlive(stream, .continuer) else { return }
        let error = HandoffError(.remoteApplicationTimedOut, "the originator did not answer the request to open streams within \(SimulatedNode.continueTimeout)")
        perform(stream, .continuer, stream.pairDo(.continuer) { $0.expireOpen(now: instant, unanswered: error) })
    }
}
