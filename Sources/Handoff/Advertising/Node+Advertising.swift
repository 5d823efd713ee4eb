import Foundation
import HandoffWire
import Logging
import SwiftProtobuf
import Synchronization
import ZeroMQ

/// The originating side on the bus, carried out: the node hands each event to its ``Advertiser``
/// and publishes what it decides.
extension Node {
    // MARK: Current activities (originating side)

    /// Makes `activity` current here (called by ``UserActivity/becomeCurrent(on:)``).
    func add(_ activity: UserActivity) throws(HandoffError) {
        guard lifecycle.runState != .stopped else {
            throw HandoffError(.notRunning, "the node has shut down", activityType: activity.activityType)
        }
        publish(advertiser.add(activity))
    }

    /// Makes many activities current at once: what ``UserActivity/becomeCurrent(on:)`` does for
    /// each, in one call into the node. Each is current when it returns; their advertisements go
    /// out back to back, a slice of 1,000 at once and the rest 1,000 every 10 ms. Either every
    /// activity is checked and becomes current, or (one is invalid, invalidated, or the node has
    /// shut down) none does and the error names the first that failed.
    public func becomeCurrent(_ activities: [UserActivity]) async throws(HandoffError) {
        guard lifecycle.runState != .stopped else {
            throw HandoffError(.notRunning, "the node has shut down", activityType: activities.first?.activityType)
        }
        for activity in activities {
            try activity.validate(maxUserInfoSize: own.configuration.maxUserInfoSize)
            guard !activity.isInvalidated else {
                throw HandoffError(.invalidatedLocally, "an invalidated activity cannot become current again; make a new one", activityType: activity.activityType)
            }
        }
        var movedFrom: [(Node, UserActivity)] = []
        for activity in activities {
            if let previous = try activity.claim(for: self), previous !== self { movedFrom.append((previous, activity)) }
        }
        for (previous, activity) in movedFrom { await previous.remove(activity, reason: .resigned) }
        // Past a slice, the rest go out a slice at a time (``Advertiser/addAll(_:now:)``).
        let wasIdle = advertiser.nextSlice == nil
        publish(advertiser.addAll(activities, now: .now))
        if wasIdle, advertiser.nextSlice != nil { spawn { await self.paceSlices() } }
    }

    /// Stops offering `activity` (resigned, invalidated, expired).
    func remove(_ activity: UserActivity, reason: RemovalReason) {
        publish(advertiser.remove(activity, reason: reason))
    }

    /// Called by a current activity whenever one of its properties changes.
    nonisolated func activityDidChange(_ id: String) {
        let first = changeQueue.changed.withLock { $0.insert(id).inserted && $0.count == 1 }
        if first { changeQueue.wake.yield() }
    }

    /// Publishes what changed: everything queued by the time it wakes up, each activity once.
    func applyChanges() async {
        for await _ in changeQueue.wakeUps {
            let changed = changeQueue.changed.withLock { pending in
                defer { pending.removeAll(keepingCapacity: true) }
                return pending
            }
            let messages = advertiser.changed(changed)
            publish(messages)
            // Only a withdrawal can be a change past the text limit: the advertised ones are not looked at again.
            for case .other(.withdrawal(let withdrawal)) in messages.lazy.map(\.content) {
                guard let activity = advertiser.current[withdrawal.activityID], activity.isEligibleForHandoff else { continue }
                own.logger.warning("\(activity.activityType) \(activity.id) changed past the contract's \(WireLimits.maxAdvertisedText) bytes of type, title, keywords and webpage URL: withdrawn until it fits again")
            }
        }
    }

    /// The activities current on this node.
    public var currentActivities: [UserActivity] { Array(advertiser.current.activities) }

    // MARK: Publishing

    /// Publishes one bus message; `false` when it was not sent (over the frame limit, or dropped).
    @discardableResult
    func sendOnBus(topic: [UInt8], _ body: WireEnvelope.OneOf_Body, traceID: String? = nil) -> Bool {
        sendOnBus(topic: topic, envelope: envelopes.bytes(body, traceID: traceID))
    }

    /// Publishes an advertisement (its envelope written from the plain values).
    @discardableResult
    func sendOnBus(topic: [UInt8], advertisement: WirePlainAdvertisement, traceID: String? = nil) -> Bool {
        sendOnBus(topic: topic, envelope: envelopes.bytes(advertisement: advertisement, traceID: traceID))
    }

    private func sendOnBus(topic: [UInt8], envelope bytes: [UInt8]) -> Bool {
        // Over the contract's frame limit, the bus would hang up on this node: never send it.
        guard bytes.count <= WireLimits.maxBusFrame, topic.count <= WireLimits.maxBusFrame else {
            own.logger.error("not publishing a \(bytes.count)-byte bus message: over the contract's \(WireLimits.maxBusFrame)-byte frame limit")
            return false
        }
        do {
            // XPUB never blocks: at the high-water mark it drops, and presence re-sends later.
            guard try sockets.publisher.trySend(topic, more: true), try sockets.publisher.trySend(bytes) else { return false }
            observability.metrics.sent(on: .bus, bytes: topic.count + bytes.count)
            return true
        } catch {
            own.logger.warning("could not publish on the bus: \(error)")
            return false
        }
    }

    /// Publishes what the advertiser decided, in its order.
    func publish(_ messages: [Advertiser.Message]) {
        for message in messages { publish(message) }
    }

    /// Publishes one message the advertiser decided.
    func publish(_ message: Advertiser.Message) {
        switch message.content {
        case .advertisement(let advertisement): sendOnBus(topic: message.topic, advertisement: advertisement)
        case .other(let body): sendOnBus(topic: message.topic, body)
        }
    }

    /// Publishes what the advertiser decided, and logs why (at info) when it says.
    func publish(_ decision: (note: String?, messages: [Advertiser.Message])) {
        if let note = decision.note { own.logger.info("\(note)") }
        publish(decision.messages)
    }

    /// The topic of a broker's request that this node advertise again (wire.proto, "R:").
    var readvertiseTopic: [UInt8] { Array((Topic.readvertisePrefix + id).utf8) }

    /// Hands what the publisher hears to the advertiser. With brokers: a broker's subscribe-all,
    /// which arrives whenever this node (re)connects to it, gets every current activity again
    /// (in slices, ``Advertiser/bulkSlice``), so a restarted broker's cache fills right away; its
    /// `R:` request too. In direct mode (the XPUB is verbose): a peer's snapshot subscription gets
    /// this node's matching activities under that topic alone (wire.proto, "Snapshots"), in
    /// slices too; a plain subscription gets nothing, so no peer hears what it knows again.
    func answerSubscriptions() async {
        let bus: Advertiser.Bus = switch own.configuration.bus {
        case .broker, .brokers: .brokered(readvertiseTopic: readvertiseTopic)
        case .direct: .direct
        }
        // What each connection to the publisher holds there, as a broker counts its subscribers'.
        var ledger = SubscriptionLedger<[UInt8]>(bounds: Broker.SubscriptionBounds())
        while !Task.isCancelled {
            guard let frame = try? await sockets.publisher.receive() else { return }
            if let descriptor = frame.sourceDescriptor { sockets.unfinishedMessages.delivered(on: descriptor) }
            guard withinSubscriptionBounds(frame, ledger: &ledger) else { continue }
            ledger.forgetGoneIfDue(now: .now)
            let bytes = frame.bytes
            guard bytes.first == 1 else { continue }
            let topic = bytes.dropFirst()
            if topic.starts(with: Topic.traceRequestPrefixBytes) {
                if let request = TraceRequest(topic: topic, nodeID: id) { answerTraceRequest(request) }
                continue
            }
            let (wasIdle, busyBefore) = (advertiser.nextSlice == nil, advertiser.snapshotsAnsweredBusy)
            publish(advertiser.subscribed(to: topic, bus: bus, now: .now))
            if wasIdle, advertiser.nextSlice != nil { spawn { await self.paceSlices() } }
            if advertiser.snapshotsAnsweredBusy > busyBefore {
                observability.metrics.snapshotAnsweredBusy()
                logRateLimited("answering \(Advertiser.maxSnapshotAnswers) peers' snapshots already; another was answered with a reply alone, and its node asks again (\(advertiser.snapshotsAnsweredBusy) so far)")
            }
        }
    }

    /// Sends the slices of passes begun between two wakes of the scheduler, each when it is due:
    /// the scheduler, asleep until its next sweep (up to 250 ms), would send the second late.
    /// Ends when no pass is under way; the scheduler sends a slice too when it wakes first.
    func paceSlices() async {
        while let due = advertiser.nextSlice {
            do { try await EventLoops.sleep(until: due) } catch { return }
            publish(advertiser.dueSlice(now: .now))
        }
    }
}
