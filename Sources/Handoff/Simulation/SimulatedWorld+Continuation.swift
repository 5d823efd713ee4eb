import Foundation
import HandoffWire
import SwiftProtobuf

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
    /// Will-save rounds begun for it (``ContinuationServer/saveDue(_:decided:rounds:)``).
    var saves = 0
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
            guard case .fetch = try node.client.plan(activity, date: date(of: index)) else { return }
        } catch {
            log("\(node.id) cannot continue \(activity.id): \(error)")
            return
        }
        guard connected(index, origin) else {
            log("\(node.id) cannot continue \(activity.id): no connection to \(nodes[origin].id)")
            return
        }
        let number = sendRequest(for: activity, refresh: false, from: index, to: origin)
        log("\(node.id) continues \(activity.id) of \(nodes[origin].id) (request \(number))")
    }

    /// Sends node `index`'s continue request (a refresh: did-update's fetch) for `activity` to its
    /// origin, through the node's ``ContinuationClient``; returns the truth's request number.
    private func sendRequest(for activity: DiscoveredActivity, refresh: Bool, from index: Int, to origin: Int) -> Int {
        let node = nodes[index]
        let number = truth.requested(by: index, deadline: now + SimulatedNode.continueTimeout)
        let (correlationID, request) = node.client.request(activity, refresh: refresh, endpoint: activity.continueEndpoint, waiter: number, now: instant)
        node.asked[correlationID] = activity
        if refresh { node.refreshes[number] = activity.id }
        let (at, epoch) = route(from: index, to: origin)
        schedule(.continueRequest(from: index, to: origin, epoch: epoch, correlationID: correlationID, request: request), at: at)
        return number
    }

    /// The originator decides on a request, as ``Node`` does with ``ContinuationServer``.
    func serve(_ request: WireContinueRequest, from requester: Int, at index: Int, correlationID: UInt64) {
        let node = nodes[index]
        switch ContinuationServer.decide(request, current: node.advertiserDo({ $0.current }), node: node.id, date: date(of: index)) {
        case .refuse(let error), .overloaded(let error):
            reply(.error(error.wire), from: index, to: requester, correlationID: correlationID)
        case .expired(let activity, let error):
            truth.ended(activity.id, at: now)
            publish(from: index, node.advertiserDo { $0.remove(activity, reason: .expired) })
            reply(.error(error.wire), from: index, to: requester, correlationID: correlationID)
        case .answer(let activity, let claimed, let save):
            handOver(PendingAnswer(activity: activity, claimed: claimed, request: request, requester: requester, correlationID: correlationID),
                     decided: save, at: index)
        }
    }

    /// Will-save while it is due, as ``Node`` runs it (``ContinuationServer/saveDue(_:decided:rounds:)``);
    /// then the last checks and the reply; a continue-once activity ends here.
    func handOver(_ answer: PendingAnswer, decided save: Bool = false, at index: Int) {
        let node = nodes[index]
        if ContinuationServer.saveDue(answer.activity, decided: save, rounds: answer.saves) {
            var saving = answer
            saving.saves += 1
            schedule(.saved(node: index, incarnation: node.incarnation, answer: saving), at: now + delay(.microseconds(100)...(.milliseconds(300))))
            return
        }
        switch ContinuationServer.finish(answer.activity, claimed: answer.claimed, maxUserInfoSize: 4_096, date: date(of: index)) {
        case .failure(let error):
            reply(.error(error.wire), from: index, to: answer.requester, correlationID: answer.correlationID)
        case .success(let activity):
            reply(.activity(activity.wire(origin: node.advertiserDo { $0.settings.origin }, defaultTeamID: nil)),
                  from: index, to: answer.requester, correlationID: answer.correlationID)
            let requester = nodes[answer.requester]
            let info = NodeInfo(id: requester.id, name: requester.id, host: "sim", publicKey: nil)
            guard let endsHere = ContinuationServer.continued(activity, by: info, refresh: answer.request.refresh)?.endsHere else { return }
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
        let envelope = nodes[index].envelope(.continueReply(reply), date: date(of: index))
        guard connected(index, requester) else { return }
        let (at, epoch) = route(from: index, to: requester)
        schedule(.continueReply(from: index, to: requester, epoch: epoch, correlationID: correlationID, envelope: envelope), at: at)
    }

    /// A reply reaches the continuing node: the first outcome of its request wins. A continuation
    /// holds the activity for did-update (as ``Node`` does while it still knows it); a refresh
    /// tells the newer version, then fetches again if a newer one was heard meanwhile.
    func replied(_ envelope: WireEnvelope, correlationID: UInt64, at index: Int) {
        let node = nodes[index]
        let answer = ContinueAnswer(sentAsBytes: envelope)
        guard let outcome = node.client.end(correlationID, .success(answer)) else { return }
        truth.requestEnded(outcome.waiter)
        let refreshed = node.refreshes.removeValue(forKey: outcome.waiter)
        guard let activity = node.asked.removeValue(forKey: correlationID) else { return }
        do {
            let continued = try ContinuationClient<Int, String>.interpret(answer, for: activity)
            guard refreshed != nil else {
                log("\(node.id) continued \(continued.id) at v\(continued.version)")
                let latest = node.followerDo { $0.known[continued.id]?.activity }
                if node.client.held.continued(continued.id, version: continued.version, known: latest?.version, now: instant), let latest {
                    startRefresh(latest, at: index)
                }
                return
            }
            let held = node.client.held.version(of: continued.id) ?? 0
            if node.client.held.accept(continued.id, fetched: continued.version) {
                truth.didUpdate(node: index, id: continued.id, version: continued.version, held: held)
                log("\(node.id) told did-update of \(continued.id) at v\(continued.version)")
            }
        } catch {
            log("\(node.id) could not \(refreshed == nil ? "continue" : "refresh") \(activity.id): \(error)")
            // (The originator's answer: tried again only for a failure on the way, as Node does.)
            if let refreshed { node.client.held.refreshFailed(refreshed, with: error.code, now: instant) }
            return
        }
        if let refreshed { endRefresh(refreshed, at: index) }
    }

    /// Node `index`'s requests that ended without a reply (timed out, dropped).
    func endRequests(_ outcomes: [ContinuationClient<Int, String>.Outcome], of index: Int) {
        let node = nodes[index]
        for outcome in outcomes {
            truth.requestEnded(outcome.waiter)
            if case .failure(let error) = outcome.result { log("request \(outcome.waiter) ended: \(error)") }
            if let id = node.refreshes.removeValue(forKey: outcome.waiter) { node.client.held.endRefresh(id, failed: instant) }
        }
    }

    /// Fetches a held activity again when a newer version of it is on the bus (did-update), as
    /// ``Node`` does: at most one fetch at a time per activity.
    func refreshIfHeld(_ activity: DiscoveredActivity, at index: Int) {
        let node = nodes[index]
        guard node.client.held.beginRefresh(activity.id, advertised: activity.version, now: instant) else { return }
        startRefresh(activity, at: index)
    }

    /// Carries out a fetch node `index`'s held activities began.
    private func startRefresh(_ activity: DiscoveredActivity, at index: Int) {
        let node = nodes[index]
        guard let origin = nodes.firstIndex(where: { $0.continueEndpoint == activity.continueEndpoint }), connected(index, origin) else {
            log("\(node.id) cannot refresh \(activity.id): no connection to its origin")
            node.client.held.endRefresh(activity.id, failed: instant)
            return
        }
        let number = sendRequest(for: activity, refresh: true, from: index, to: origin)
        log("\(node.id) refreshes \(activity.id) at v\(activity.version) (request \(number))")
    }

    /// Fetches again the held activities of node `index` whose did-update fetch failed, as
    /// ``Node`` does on its scheduler's turn.
    func retryRefreshes(at index: Int) {
        let node = nodes[index]
        for id in node.client.held.dueRetries(now: instant, knownVersion: { id in node.followerDo { $0.known[id]?.activity.version } }) {
            if let latest = node.followerDo({ $0.known[id]?.activity }) { refreshIfHeld(latest, at: index) }
        }
    }

    /// A refresh is over: the next newer version may start another, and one heard meanwhile does.
    private func endRefresh(_ id: String, at index: Int) {
        let node = nodes[index]
        let latest = node.followerDo { $0.known[id]?.activity }
        if node.client.held.refreshEnded(id, known: latest?.version, now: instant), let latest { startRefresh(latest, at: index) }
    }
}

extension ContinueAnswer {
    /// The reply as a node's receiver reads it: sent as bytes, decoded as its DEALER's messages
    /// are (``WireReplyEnvelope``), so that every seeded run goes through that reader.
    init(sentAsBytes envelope: WireEnvelope) {
        guard let bytes: [UInt8] = try? envelope.serializedBytes(),
              let read = try? bytes.withUnsafeBytes({ (bytes: UnsafeRawBufferPointer) throws(WireDecodingError) in try WireReplyEnvelope.decode(bytes) })
        else {
            self = .envelope(envelope)
            return
        }
        switch read {
        case .activityReply(_, let activity): self = .activity(activity)
        case .streamFrame, .other: self = .envelope(envelope)
        }
    }
}
