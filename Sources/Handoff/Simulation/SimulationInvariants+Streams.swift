import Foundation

// The invariants of continuation streams (issue 37: "every stream ends whole with the right length
// and CRC-32C, or with a typed error, never short and silent"; memory per peer within its bounds).
extension SimulationInvariants {
    /// How long an end may go without progress and without ending while nothing it waits for is
    /// its own application: the idle timeout and the resume window, and slack for a tick and a
    /// stop of the peer.
    static var streamSilenceBound: Duration {
        SimulatedStream.settings.idleTimeout + SimulatedStream.settings.resumeWindow + .seconds(10)
    }

    /// Each end's machine is read in place (``SimulatedStream/pairDo(_:_:)``): the invariants look
    /// at every end after every step, and a copy of a machine (its buffers, a dozen references)
    /// is what its computed properties read through the end's reference cost.
    static func streams(_ world: SimulatedWorld) -> SimulationFailure? {
        for stream in world.streams {
            if let corrupted = stream.corrupted {
                return failure(world, "stream-bytes-exact", "stream \(stream.number): \(corrupted)")
            }
            // "stream-honest-peers-agree": two honest ends never find each other breaking the rules,
            // however the network drops, delays and cuts their frames.
            if !stream.floods, stream.lie == nil,
               let side = SimulatedStream.Side.allCases.first(where: { stream.endDo($0, { $0.failure?.code == .streamProtocolViolation }) == true }) {
                return failure(world, "stream-honest-peers-agree", "stream \(stream.number), \(side) side: \(stream[side]!.failure!.message)")
            }
            // "stream-stall-justified": only a peer whose application stopped (writing, or
            // reading) is given up on for stalling; a slow or pausing reader, a broken connection
            // or a stopped node never is.
            if !stream.stuck, !stream.floods, !stream.reader.stopsReading,
               let side = SimulatedStream.Side.allCases.first(where: { stream.endDo($0, { $0.failure?.details["scope"] == "stalled" }) == true }) {
                return failure(world, "stream-stall-justified", "stream \(stream.number), \(side) side, whose applications write and read: \(stream[side]!.failure!.message)")
            }
            for side in SimulatedStream.Side.allCases where world.endAlive(stream, side) {
                if let failure = streamBounded(world, stream, side) ?? streamEnds(world, stream, side) { return failure }
            }
        }
        return nil
    }

    /// "stream-memory-bounded": what an end keeps for its peer stays within the window it granted
    /// or was granted: chunks kept for a resume, chunks handed to its reader and not read.
    private static func streamBounded(_ world: SimulatedWorld, _ stream: SimulatedStream, _ side: SimulatedStream.Side) -> SimulationFailure? {
        let held = stream.endDo(side) { $0.held }!
        let (kept, unconsumed, window, outstanding) = stream.pairDo(side) {
            ($0.retained.count + $0.resend.count, $0.unconsumed, $0.window, $0.creditOutstanding)
        }
        guard kept <= StreamPair.maxUnacknowledgedChunks, unconsumed <= window, outstanding <= window, held <= window else {
            return failure(world, "stream-memory-bounded", "stream \(stream.number), \(side) side: \(kept) chunks kept for a resume, \(unconsumed) unread of a \(window)-chunk window, \(outstanding) granted")
        }
        return nil
    }

    /// "stream-ends": an end that waits on nothing of its own (its reader is not pausing) makes
    /// progress, or ends (whole, or with a typed error) within the idle timeout and the resume
    /// window (a stuck writer's, by the stall timeout); and a flooding writer's reader never takes
    /// the flood as a whole stream.
    private static func streamEnds(_ world: SimulatedWorld, _ stream: SimulatedStream, _ side: SimulatedStream.Side) -> SimulationFailure? {
        // What the rules below read of this end and its machine (in place).
        let (node, readWhole, finished) = stream.endDo(side) { ($0.node, $0.readWhole, $0.finished) }!
        let (waits, lastProgress, peersTurnSince) = stream.pairDo(side) {
            (!finished && $0.isLive && !$0.isOpening, $0.lastProgress, $0.peersTurnSince)
        }
        if stream.floods, side == .origin, readWhole {
            return failure(world, "stream-ends", "stream \(stream.number): the originator took a flood past the credit as a whole stream")
        }
        // A flooding (hostile) writer sends its flood past its pair's machine and never an end, so
        // a resume does not bring a flood lost with a connection again, and both ends then wait on
        // it (seed 384371105). That is the design, not a stall of the protocol's making: an
        // originator keeps such a pair, within the memory bounds checked above, until it needs the
        // room (`Node.evictStalledStream`, past `streamStallGrace`), or its stall timeout ends it,
        // as for any pair whose peer stopped writing.
        if stream.floods { return nil }
        // Finished, failed, or opening (the open's own deadline ends it: streamOpenTimeout).
        guard waits else { return nil }
        var anchor = max(stream.openedAt, lastProgress - world.origin)
        for other in SimulatedStream.Side.allCases {
            guard let (pausedUntil, node) = stream.endDo(other, { ($0.pausedUntil, $0.node) }) else { continue }
            if let until = pausedUntil { anchor = max(anchor, until) }
            anchor = max(anchor, world.nodes[node].wentOnAt)
        }
        // A stopped process does nothing, this end's own included: stopped past its resume window,
        // it gives its pair up once it goes on, not before (seed 69868643).
        for node in [world.streamNode(stream, side.other), node] {
            if let resumed = world.nodes[node].stoppedUntil { anchor = max(anchor, resumed) }
        }
        // A stuck writer's pair ends by the stall timeout, counted from the start of the peer's
        // turn (which the time spent interrupted moves on); or, cut off near its end, by the
        // resume window after the idle timeout; and a tick and a stop of the peer more. The clock
        // is the waiting side's, so each end counts from the later of the two: the two sides are
        // excused different times for one partition (the side that sees its connection drop is
        // interrupted at once, the other only when its idle timeout notices), and the side that
        // holds the turn ends by the other's give-up, or by its resume window if that is cut off
        // (seed 988593252).
        var bound = streamSilenceBound
        if stream.stuck, let stall = stream.stallTimeout {
            var turn = peersTurnSince
            if stream[side.other] != nil {
                turn = max(turn, stream.pairDo(side.other) { $0.peersTurnSince })
            }
            anchor = max(anchor, turn - world.origin)
            bound = stall + SimulatedStream.settings.idleTimeout + SimulatedStream.settings.resumeWindow + .seconds(2)
        }
        guard world.now - anchor > bound else { return nil }
        let end = stream[side]!
        return failure(world, "stream-ends", "stream \(stream.number), \(side) side (on \(world.nodes[end.node].id)): no progress and no end for \(world.now - anchor) (\(end.received) bytes read, \(end.written) written), past \(bound)")
    }
}
