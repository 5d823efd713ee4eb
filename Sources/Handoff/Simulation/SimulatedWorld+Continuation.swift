import Foundation
import HandoffWire

/// A will-save that takes its time (activities hold their delegate weakly: the world keeps it).
final class SimulatedSaver: UserActivityDelegate {
    func userActivityWillSave(_ activity: UserActivity) async {}
}

/// An answer waiting for its will-save.
struct PendingAnswer {
    let activity: UserActivity
    let claimed: Bool
    let request: WireContinueRequest
    let requester: Int
    let correlationID: UInt64
}

/// Continuation in the simulated world: the continuing side is each node's ``ContinuationClient``,
/// the originating side ``ContinuationServer``, both as the node runs them; requests and replies
/// travel on the nodes' connections (a DEALER to the originator, which refuses to queue while
/// there is no connection, as `ZMQ_IMMEDIATE` does).
extension SimulatedWorld {
    /// Node `index` continues the `pick`-th activity it knows.
    func continueActivity(at index: Int, pick: Int) {
        let node = nodes[index]
        let known = node.followerDo { $0.known.values.map(\.activity) }.sorted { $0.id < $1.id }
        guard !known.isEmpty else { return }
        let activity = known[pick % known.count]
        guard let origin = nodes.firstIndex(where: { $0.continueEndpoint == activity.continueEndpoint }) else { return }
        do {
            guard case .fetch = try node.client.plan(activity, date: date) else { return }
        } catch {
            log("\(node.id) cannot continue \(activity.id): \(error)")
            return
        }
        guard connected(index, origin) else {
            log("\(node.id) cannot continue \(activity.id): no connection to \(nodes[origin].id)")
            return
        }
        let number = truth.requested(by: index, deadline: now + SimulatedNode.continueTimeout)
        let (correlationID, request) = node.client.request(activity, refresh: false, endpoint: activity.continueEndpoint, waiter: number, now: instant)
        node.asked[correlationID] = activity
        log("\(node.id) continues \(activity.id) of \(nodes[origin].id) (request \(number))")
        let (at, epoch) = route(from: index, to: origin)
        schedule(.continueRequest(from: index, to: origin, epoch: epoch, correlationID: correlationID, request: request), at: at)
    }

    /// The originator decides on a request, as ``Node`` does with ``ContinuationServer``.
    func serve(_ request: WireContinueRequest, from requester: Int, at index: Int, correlationID: UInt64) {
        let node = nodes[index]
        switch ContinuationServer.decide(request, current: node.advertiserDo({ $0.current }), node: node.id, date: date) {
        case .refuse(let error):
            reply(.error(error.wire), from: index, to: requester, correlationID: correlationID)
        case .expired(let activity, let error):
            truth.ended(activity.id, at: now)
            publish(from: index, node.advertiserDo { $0.remove(activity, reason: .expired) })
            reply(.error(error.wire), from: index, to: requester, correlationID: correlationID)
        case .answer(let activity, let claimed, let save):
            let answer = PendingAnswer(activity: activity, claimed: claimed, request: request, requester: requester, correlationID: correlationID)
            if save {
                schedule(.saved(node: index, incarnation: node.incarnation, answer: answer), at: now + delay(.microseconds(100)...(.milliseconds(300))))
            } else {
                handOver(answer, at: index)
            }
        }
    }

    /// The last checks and the reply; a continue-once activity ends here.
    func handOver(_ answer: PendingAnswer, at index: Int) {
        let node = nodes[index]
        switch ContinuationServer.finish(answer.activity, claimed: answer.claimed, maxUserInfoSize: 4_096, date: date) {
        case .failure(let error):
            reply(.error(error.wire), from: index, to: answer.requester, correlationID: answer.correlationID)
        case .success(let activity):
            reply(.activity(activity.wire(origin: node.advertiserDo { $0.settings.origin }, defaultTeamID: nil)),
                  from: index, to: answer.requester, correlationID: answer.correlationID)
            let requester = nodes[answer.requester]
            let info = NodeInfo(id: requester.id, name: requester.id, host: "sim", publicKey: nil)
            guard let (_, endsHere) = ContinuationServer.continued(activity, by: info, refresh: answer.request.refresh) else { return }
            truth.handOver(activity.id)
            log("\(node.id) hands \(activity.id) over to \(requester.id)\(endsHere ? " (continue-once: it ends here)" : "")")
            if endsHere {
                activity.invalidateAfterContinuation()
                truth.ended(activity.id, at: now)
                publish(from: index, node.advertiserDo { $0.continuedOnce(activity) })
            }
        }
    }

    private func reply(_ result: WireContinueReply.OneOf_Result, from index: Int, to requester: Int, correlationID: UInt64) {
        var reply = WireContinueReply()
        reply.result = result
        let envelope = nodes[index].envelope(.continueReply(reply), date: date)
        guard connected(index, requester) else { return }
        let (at, epoch) = route(from: index, to: requester)
        schedule(.continueReply(from: index, to: requester, epoch: epoch, correlationID: correlationID, envelope: envelope), at: at)
    }

    /// A reply reaches the continuing node: the first outcome of its request wins.
    func replied(_ envelope: WireEnvelope, correlationID: UInt64, at index: Int) {
        let node = nodes[index]
        guard let outcome = node.client.end(correlationID, .success(envelope)) else { return }
        truth.requestEnded(outcome.waiter)
        guard let activity = node.asked.removeValue(forKey: correlationID) else { return }
        do {
            let continued = try ContinuationClient<Int, String>.interpret(envelope, for: activity)
            log("\(node.id) continued \(continued.id) at v\(continued.version)")
        } catch {
            log("\(node.id) could not continue \(activity.id): \(error)")
        }
    }

    /// Requests that ended without a reply (timed out, dropped).
    func endRequests(_ outcomes: [ContinuationClient<Int, String>.Outcome]) {
        for outcome in outcomes {
            truth.requestEnded(outcome.waiter)
            if case .failure(let error) = outcome.result { log("request \(outcome.waiter) ended: \(error)") }
        }
    }
}
