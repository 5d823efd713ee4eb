import Foundation
import HandoffWire
import Logging

// Tracing (wire.proto, "Tracing"): the origin advertises once more, traced, when a tracer asks;
// a node that receives a traced envelope says when, and what it made of it. Nothing here runs for
// an envelope without a trace id.
extension Node {
    /// A tracer's request heard on the publisher: advertises the activity again with the trace id
    /// and reports that it was sent (or that it is not current here).
    func answerTraceRequest(_ request: TraceRequest) {
        guard observability.traceRequests.allow(now: .now) else {
            logRateLimited("ignoring a tracer's request for \(request.activityID): over \(TraceRequestLimit.perSecond) a second")
            return
        }
        guard let activity = advertiser.current[request.activityID], let advertisement = advertiser.advertisement(of: activity) else {
            sendOnBus(topic: Topic.trace(request.traceID), .traceHop(.hop(
                .notDelivered, traceID: request.traceID, activityID: request.activityID,
                detail: "not current on its origin (or not eligible for Handoff)")))
            return
        }
        let sent = Date()
        guard sendOnBus(topic: Topic.activity(activity.activityType), advertisement: advertisement, traceID: request.traceID) else { return }
        sendOnBus(topic: Topic.trace(request.traceID), .traceHop(.hop(
            .sent, traceID: request.traceID, activityID: request.activityID,
            detail: "version \(advertisement.version) on A:\(activity.activityType)", at: sent)))
        own.logger.info("advertised \(request.activityID) again, traced as \(request.traceID)")
    }

    /// A traced envelope from the bus: the follower takes it as any other, then this node reports
    /// its receipt and the outcome under the trace's topic.
    func receiveTraced(_ envelope: WireEnvelope, topic: [UInt8], connectionKey: Data?, received: Date) {
        let actions = follower.received(envelope, topic: topic, connectionKey: connectionKey, now: .now, date: received)
        perform(actions)
        let activityID: String? = switch envelope.body {
        case .advertisement(let advertisement): advertisement.activityID
        case .withdrawal(let withdrawal): withdrawal.activityID
        default: nil
        }
        // Reported only for what a trace follows (an advertisement or a withdrawal), with a
        // well-formed id, at most ten a second: a peer that sets trace ids on all it publishes
        // cannot make every node on the bus publish two hops for each of its messages.
        let traceID = envelope.traceID
        guard let activityID, TraceRequest.isTraceID(traceID), observability.receivedTraces.allow(now: .now) else { return }
        let hopsTopic = Topic.trace(traceID)
        sendOnBus(topic: hopsTopic, .traceHop(.hop(.received, traceID: traceID, activityID: activityID, at: received)))
        sendOnBus(topic: hopsTopic, .traceHop(outcome(of: actions, activityID: activityID, traceID: traceID)))
    }

    /// What the follower's actions did with the traced activity, as a hop.
    private func outcome(of actions: [Follower.Action], activityID: String, traceID: String) -> WireTraceHop {
        for action in actions {
            switch action {
            case .emit(let event) where event.activity.id == activityID:
                let kind = switch event {
                case .appeared: "appeared"
                case .updated: "updated"
                case .removed(_, let reason): "removed (\(reason))"
                }
                let streams = listeners.watchers.sinks(for: event.activity).count
                return .hop(.delivered, traceID: traceID, activityID: activityID,
                            detail: "\(kind), to \(streams) discover stream\(streams == 1 ? "" : "s")")
            case .ignored(let why):
                let reason = switch why {
                case .foreign(let text): "ignored as foreign: \(text)"
                case .stale: "ignored as stale (outside the replay window)"
                case .replayed: "ignored as a replay (a sequence already seen)"
                case .overQuota: "ignored: over its origin's quota"
                case .malformed(let text): "ignored as malformed: \(text)"
                }
                return .hop(.notDelivered, traceID: traceID, activityID: activityID, detail: reason)
            default:
                continue
            }
        }
        let known = follower.known[activityID].map { "already known at version \($0.activity.version): renewed" } ?? "not followed here"
        return .hop(.notDelivered, traceID: traceID, activityID: activityID, detail: known)
    }
}
