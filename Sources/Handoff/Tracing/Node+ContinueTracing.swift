import Foundation
import HandoffWire
import Logging

/// A traced continue request this node is answering (wire.proto, "Tracing"): what its hops name.
struct ContinueTrace: Sendable {
    let traceID: String
    let activityID: String
}

// Tracing a continue on the originating side: a request that carries a trace id is answered as any
// other, and this node says on the bus when it took it and when (and how) it answered.
extension Node {
    /// A traced request came off the continuation endpoint at `received`: reports it, within the
    /// tracers' limit (beyond it, and for a trace id that is not 32 hexadecimal digits, the request
    /// is answered untraced).
    func startContinueTrace(traceID: String, _ request: WireContinueRequest, requester: NodeInfo, received: Date?) -> ContinueTrace? {
        guard admitsTrace(traceID, of: "continue request") else { return nil }
        let trace = ContinueTrace(traceID: traceID, activityID: request.activityID)
        sendOnBus(topic: Topic.trace(traceID), .traceHop(.hop(
            .continueReceived, traceID: traceID, activityID: request.activityID, detail: "from \(requester)", at: received ?? Date())))
        return trace
    }

    /// Whether a request carrying `traceID` (empty: untraced) is answered traced: a well-formed
    /// id, within the tracers' limit (``TraceRequestLimit``, shared by every kind of request).
    func admitsTrace(_ traceID: String, of what: String) -> Bool {
        guard !traceID.isEmpty else { return false }
        guard TraceRequest.isTraceID(traceID) else {
            logRateLimited("answering a \(what) untraced: its trace id is not \(Topic.snapshotTokenLength) hexadecimal digits")
            return false
        }
        guard observability.traceRequests.allow(now: .now) else {
            logRateLimited("answering a traced \(what) untraced: over \(TraceRequestLimit.perSecond) traces a second")
            return false
        }
        return true
    }

    /// The reply to a traced request went out: reports what it said (`detail` is made only then).
    func endContinueTrace(_ trace: ContinueTrace?, _ detail: @autoclosure () -> String) {
        guard let trace else { return }
        sendOnBus(topic: Topic.trace(trace.traceID), .traceHop(.hop(.continueAnswered, traceID: trace.traceID, activityID: trace.activityID, detail: detail())))
    }
}
