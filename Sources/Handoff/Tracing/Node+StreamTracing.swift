import Foundation
import HandoffWire

// Tracing a continued activity's streams on the originating side (wire.proto, "Tracing"): an open
// whose envelope carries the trace id of the continue it follows is answered as any other, and
// this node says on the bus when it answered it and how the pair ended. The continuing side sets
// that id on its open (``StreamSession/traceID``, from ``ContinuedActivity/traceID``).
extension Node {
    /// A traced open was answered with `answer` (within the tracers' limit): reported, and the
    /// pair's end will be. `peerName`: the name the continuing node gives (the continue hops name
    /// it so), beside the start of its id or key, which the pair is counted under.
    func traceOpened(_ session: StreamSession, _ answer: WireStreamOpen, traceID: String, peerName: String) {
        session.traceID = traceID
        let direction = switch answer.direction {
        case .originToContinuer: "from the originator only"
        case .continuerToOrigin: "to the originator only"
        default: "both ways"
        }
        let peer = peerName.isEmpty ? session.owner : "\(peerName) (\(session.owner.prefix(8)))"
        let detail = "pair \(session.route.id) with \(peer), \(direction): a window of \(answer.window) chunks of up to "
            + "\(answer.chunkSize) bytes; the originator's end carries \(own.configuration.streamChecksum)"
        sendOnBus(topic: Topic.trace(traceID), .traceHop(.hop(.streamOpened, traceID: traceID, activityID: session.activityID, detail: detail)))
    }

    /// A traced open was refused: its only hop, its end (within the tracers' limit). An activity id
    /// past the wire's limits (one reason to refuse) is not repeated on the bus.
    func traceRefusedOpen(_ open: WireStreamOpen, traceID: String, _ error: HandoffError) {
        guard admitsTrace(traceID, of: "stream open") else { return }
        let activityID = WireLimits.fits(activityID: open.activityID, activityType: "") ? open.activityID : ""
        sendOnBus(topic: Topic.trace(traceID), .traceHop(.hop(
            .streamEnded, traceID: traceID, activityID: activityID, detail: "refused: \(error.code): \(error.message)")))
    }

    /// A traced pair ended on this side: reported, once (`outcome` is made only then).
    func traceEnded(_ session: StreamSession, _ outcome: @autoclosure () -> String) {
        guard !session.isContinuer, let traceID = session.traceID else { return }
        session.traceID = nil
        sendOnBus(topic: Topic.trace(traceID), .traceHop(.hop(.streamEnded, traceID: traceID, activityID: session.activityID, detail: outcome())))
    }
}
