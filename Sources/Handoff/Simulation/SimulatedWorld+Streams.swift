import Foundation
import HandoffWire
import ZeroMQ

// Continuation streams in the simulated world: each end's ``StreamPair`` (the production machine)
// in a shell that hands its frames to the simulated connection between the two nodes, as ``Node``
// hands them to its DEALER (continuing side) and ROUTER (originating side).
extension SimulatedWorld {
    typealias Side = SimulatedStream.Side

    /// Node `index` opens a stream pair with the origin of the `pick`-th activity it knows.
    func openStream(at index: Int, pick: Int, bytes: Int, direction: WireStreamDirection, reader: SimulatedStream.Reader, floods: Bool) {
        let node = nodes[index]
        let known = node.followerDo { $0.known.values.map(\.activity) }.sorted { $0.id < $1.id }
        guard !known.isEmpty else { return }
        let activity = known[pick % known.count]
        guard let origin = nodes.firstIndex(where: { $0.continueEndpoint == activity.continueEndpoint }), origin != index else { return }
        let pair = StreamPair(
            isContinuer: true, direction: direction, peerName: "the originator", activityType: activity.activityType,
            window: floods ? 4 : 2 + bytes % 15, chunkSize: SimulatedStream.settings.chunkSize,
            peerChunkSize: SimulatedStream.settings.chunkSize, now: instant)
        // A hostile originator lies about every other stream it writes (which, and how, from the
        // stream's number: the seed's other draws stay as they were).
        let number = streams.count
        let lie = nodes[origin].hostile && direction != .continuerToOrigin && bytes > 0 && number % 2 == 0
            ? SimulatedStream.Lie.allCases[number / 2 % SimulatedStream.Lie.allCases.count] : nil
        // Every other stream has a stall timeout, and one in five of those a stuck writer (from the
        // pick, likewise: no new draw).
        let stallTimeout = pick % 2 == 0 ? SimulatedStream.stallTimeout : nil
        let stuck = stallTimeout != nil && pick % 5 == 0 && bytes > 1 && !floods && lie == nil
        let stream = SimulatedStream(
            number: number, activityID: activity.id, direction: direction, bytes: bytes, reader: reader, floods: floods, lie: lie,
            stallTimeout: stallTimeout, stuck: stuck, openedAt: now, continuer: .init(node: index, incarnation: node.incarnation, pair: pair))
        streams.append(stream)
        streamOrigins.append(origin)
        log("\(node.id) opens stream \(stream.number) with \(nodes[origin].id) for \(activity.id): \(bytes) bytes \(Self.describe(direction)), \(floods ? "flooding, ignoring its credit" : "\(reader)")\(lie.map { "; the originator \($0)" } ?? "")\(stallTimeout.map { "; stall timeout \($0)" } ?? "")\(stuck ? "; its writers stop half way" : "")")
        var request = WireStreamOpen()
        request.activityID = activity.id
        request.direction = direction
        request.window = UInt32(pair.window)
        request.chunkSize = UInt32(SimulatedStream.settings.chunkSize)
        request.checksumAlgorithm = stream.checksumAlgorithm(writtenBy: .continuer).wire
        perform(stream, .continuer, stream.pairDo(.continuer) { $0.open(request, now: instant, answerWithin: SimulatedNode.continueTimeout) })
        schedule(.streamOpenTimeout(stream: stream.number), at: now + SimulatedNode.continueTimeout)
    }

    static func describe(_ direction: WireStreamDirection) -> String {
        switch direction {
        case .originToContinuer: "from the originator"
        case .continuerToOrigin: "to the originator"
        default: "both ways"
        }
    }

    /// The node an end of `stream` lives on.
    func streamNode(_ stream: SimulatedStream, _ side: Side) -> Int {
        side == .continuer ? stream.endDo(.continuer) { $0.node }! : streamOrigins[stream.number]
    }

    /// Whether the end's process still runs (its node was not killed since it was made).
    func endAlive(_ stream: SimulatedStream, _ side: Side) -> Bool {
        guard let (node, incarnation) = stream.endDo(side, { ($0.node, $0.incarnation) }) else { return false }
        return nodes[node].alive && nodes[node].incarnation == incarnation
    }

    /// Whether the end still has its pair: its process runs and the pair did not complete (the
    /// node forgets a completed pair; a failed one it keeps a while, to drop late frames quietly).
    func endHeld(_ stream: SimulatedStream, _ side: Side) -> Bool {
        endAlive(stream, side) && stream.endDo(side, { $0.completed }) == false
    }

    // MARK: Frames

    /// A stream frame reaches the node at `side` of `stream`.
    func streamFrameArrives(_ stream: SimulatedStream, at side: Side, kind: WireStreamFrame.OneOf_Kind, payload: Frame?) {
        if side == .origin {
            switch kind {
            case .open(let request):
                acceptStream(stream, request)
                return
            case .resume(let resume):
                guard endHeld(stream, .origin), stream[.origin]!.pair.isLive, stream[.origin]!.pair.resumeToken == resume.resumeToken else {
                    // The pair is gone here (the process restarted, or the pair ended): the node says so.
                    refuseStream(stream, HandoffError(.peerLost, "\(nodes[streamNode(stream, .origin)].id) has no stream pair \(stream.number) to resume"))
                    return
                }
                perform(stream, .origin, stream.pairDo(.origin) { $0.resumeRequested(resume, now: instant) })
                drive(stream)
                return
            default:
                break
            }
        }
        guard endHeld(stream, side), stream.pairDo(side, { $0.isLive }) else { return }
        let chunk = payload.map { Data($0.dataWithoutCopying) }
        perform(stream, side, stream.pairDo(side) { $0.received(kind, chunk: chunk, now: instant) })
        drive(stream)
    }

    /// The originating node's side of an open, decided as ``Node`` decides it (``StreamOpenCheck``;
    /// the world keeps no count of pairs per node, so no limit refuses one here).
    private func acceptStream(_ stream: SimulatedStream, _ request: WireStreamOpen) {
        let index = streamNode(stream, .origin)
        guard stream[.origin] == nil || !endAlive(stream, .origin) else { return }  // the same open again
        let activity: UserActivity
        switch StreamOpenCheck.check(request, in: nodes[index].advertiserDo({ $0.current }), node: nodes[index].id) {
        case .refuse(let error):
            refuseStream(stream, error)
            return
        case .accept(let accepted, _):
            activity = accepted
        }
        let pair = StreamPair(
            isContinuer: false, direction: request.direction, peerName: "the continuing node \(nodes[stream[.continuer]!.node].id)",
            activityType: activity.activityType, window: Int(request.window), chunkSize: SimulatedStream.settings.chunkSize,
            peerChunkSize: StreamPair.chunkSize(announced: request.chunkSize), now: instant)
        stream[.origin] = .init(node: index, incarnation: nodes[index].incarnation, pair: pair)
        let answer = StreamOpenCheck.answer(
            request, document: nil, window: Int(request.window), chunkSize: SimulatedStream.settings.chunkSize,
            checksum: stream.checksumAlgorithm(writtenBy: .origin).wire, resumeToken: Data(streamNetwork.token().utf8))
        perform(stream, .origin, stream.pairDo(.origin) { $0.accept(request, answer: answer, now: instant) })
        stream[.origin]!.read = ReceivedBytes(checksum: pair.peerChecksum)
        if case .letsGo(0) = stream.reader { letGo(stream, .origin) }
        drive(stream)
    }

    /// The originating node answers a frame with an error, without a pair.
    private func refuseStream(_ stream: SimulatedStream, _ error: HandoffError) {
        transmit(stream, from: .origin, .error(error.wire), payload: nil)
    }

    /// Puts an end's frame on the connection to the other end's node. The continuing side's
    /// DEALER refuses while it has no connection (ZMQ_IMMEDIATE): its pair is interrupted. The
    /// originating side's ROUTER drops a frame for a peer that is gone.
    func transmit(_ stream: SimulatedStream, from side: Side, _ kind: WireStreamFrame.OneOf_Kind, payload: Frame?) {
        let from = streamNode(stream, side), to = streamNode(stream, side.other)
        guard connected(from, to) else {
            if side == .continuer, endAlive(stream, .continuer) { stream.pairDo(.continuer) { $0.transportRefused(now: instant) } }
            return
        }
        let (kind, payload) = side == .origin ? stream.lying(kind, payload: payload) : (kind, payload)
        let key = from * options.nodes + to
        let arrival = max(now + streamNetwork.duration(.microseconds(100)...options.maxLatency), streamArrivals[key] ?? .zero)
        streamArrivals[key] = arrival
        schedule(.streamFrame(stream: stream.number, to: side.other, epoch: epoch(from: from, to: to), kind: kind, payload: payload), at: arrival)
    }

    // MARK: Carrying out

    /// Carries out what an end's machine decided.
    func perform(_ stream: SimulatedStream, _ side: Side, _ actions: [StreamPair.Action]) {
        let node = nodes[streamNode(stream, side)].id
        for action in actions {
            switch action {
            case .send(let kind, let payload):
                transmit(stream, from: side, kind, payload: payload)
            case .deliver(let bytes):
                readerReceived(stream, side, bytes)
            case .deliverEnd(let total, let checksum):
                readerEnded(stream, side, total: total, checksum: checksum)
            case .expectLength, .wakeWriter:
                break  // the writer is driven after every event
            case .opened:
                stream[side]!.read = ReceivedBytes(checksum: stream[side]!.pair.peerChecksum)
                log("\(node): stream \(stream.number) open")
            case .failed(let error):
                stream[side]!.failure = error
                log("\(node): stream \(stream.number) failed (\(side) side): \(error.code): \(error.message)")
            case .completed:
                stream[side]!.completed = true
                log("\(node): stream \(stream.number) complete (\(side) side)")
            case .record(let record):
                switch record {
                case .resumed(let peerHad, _): log("\(node): stream \(stream.number) resumed, the peer had \(peerHad) bytes")
                case .violation(let error): log("\(node): stream \(stream.number): the peer broke the rules: \(error.message)")
                case .interruptedBySilence: log("\(node): stream \(stream.number) interrupted: nothing heard")
                case .droppedAheadOfResume(let count): log("\(node): stream \(stream.number) dropped \(count) bytes beyond a gap, its resume unanswered")
                case .endDroppedAheadOfResume(let total): log("\(node): stream \(stream.number) dropped its end (\(total) bytes) beyond a gap, its resume unanswered")
                case .stalled: log("\(node): stream \(stream.number): gave up on a peer that made no progress")
                case .endNotVerified(let carried, let announced, let total):
                    // Every writer here ends in the algorithm it announced: an end not verified is a bug.
                    stream.corrupted = stream.corrupted ?? "the \(side) side could not verify an end of \(total) bytes: it carries \(carried), the open announced \(announced.map(String.init(describing:)) ?? "an unknown algorithm")"
                case .duplicateBytesDropped, .bytesResent, .lost, .readerStopped, .letGo: break
                }
            }
        }
    }

    /// The writing applications write while their credit allows, then end.
    func drive(_ stream: SimulatedStream) {
        for side in Side.allCases where endHeld(stream, side) {
            guard let end = stream[side], !end.letGo, !end.endWritten, stream.pairDo(side, { $0.writes && $0.isLive && !$0.isOpening }) else { continue }
            if stream.floods, side == .continuer {
                flood(stream)
                continue
            }
            while stream[side]!.written < stream.bytesToWrite, stream.pairDo(side, { $0.writerMayProceed && $0.isLive }) {
                let offset = stream[side]!.written
                let bytes = stream.content(offset..<min(stream.bytesToWrite, offset + stream[side]!.pair.writeChunkSize))
                stream[side]!.written += bytes.count
                let chunk = StreamPair.SentChunk(offset: UInt64(offset), frame: Frame(bytes), total: UInt64(stream.bytes))
                perform(stream, side, stream.pairDo(side) { $0.write(chunk, now: instant) })
            }
            if stream[side]!.written == stream.bytes, stream.pairDo(side, { $0.isLive }) {
                stream[side]!.endWritten = true
                let checksum = stream.checksum(writtenBy: side)
                perform(stream, side, stream.pairDo(side) { $0.writeEnd(total: UInt64(stream.bytes), checksum: checksum, now: instant) })
            }
        }
    }

    /// A hostile continuing node sends three windows of chunks at once, past the credit granted.
    private func flood(_ stream: SimulatedStream) {
        stream[.continuer]!.endWritten = true
        let size = stream[.continuer]!.pair.writeChunkSize
        for index in 0..<(3 * stream[.continuer]!.pair.window) {
            var data = WireStreamData()
            data.offset = UInt64(index * size)
            data.length = UInt32(size)
            transmit(stream, from: .continuer, .data(data), payload: Frame(stream.content(index * size..<(index + 1) * size)))
        }
    }
}
