import Foundation
import HandoffWire
import Logging
import SwiftProtobuf
import Synchronization
import ZeroMQ

/// The originating side on the bus: this node's current activities, what it publishes about them,
/// re-advertisement and expiry, and its answers to subscriptions (snapshots in direct mode).
extension Node {
    // MARK: Current activities (originating side)

    /// Makes `activity` current here (called by ``UserActivity/becomeCurrent(on:)``).
    func add(_ activity: UserActivity) throws(HandoffError) {
        guard runState != .stopped else {
            throw HandoffError(.notRunning, "the node has shut down", activityType: activity.activityType)
        }
        current.add(activity)
        publish(activity)
    }

    /// Makes many activities current at once: what ``UserActivity/becomeCurrent(on:)`` does for
    /// each, in one call into the node, their advertisements sent back to back. Either every
    /// activity is checked and becomes current, or (one is invalid, invalidated, or the node has
    /// shut down) none does and the error names the first that failed.
    public func becomeCurrent(_ activities: [UserActivity]) async throws(HandoffError) {
        guard runState != .stopped else {
            throw HandoffError(.notRunning, "the node has shut down", activityType: activities.first?.activityType)
        }
        for activity in activities {
            try activity.validate(maxUserInfoSize: configuration.maxUserInfoSize)
            guard !activity.isInvalidated else {
                throw HandoffError(.invalidatedLocally, "an invalidated activity cannot become current again; make a new one", activityType: activity.activityType)
            }
        }
        var movedFrom: [(Node, UserActivity)] = []
        for activity in activities {
            if let previous = try activity.claim(for: self), previous !== self { movedFrom.append((previous, activity)) }
        }
        for (previous, activity) in movedFrom { await previous.remove(activity, reason: .resigned) }
        for activity in activities {
            current.add(activity)
            publish(activity)
        }
    }

    /// Stops offering `activity` (resigned, invalidated, expired).
    func remove(_ activity: UserActivity, reason: RemovalReason) {
        guard current.remove(activity.id, reason: reason) else { return }
        publishWithdrawal(of: activity, reason: reason)
    }

    /// Called by a current activity whenever one of its properties changes.
    nonisolated func activityDidChange(_ id: String) {
        let first = changedActivities.withLock { $0.insert(id).inserted && $0.count == 1 }
        if first { changesContinuation.yield() }
    }

    /// Publishes what changed: everything queued by the time it wakes up, each activity once.
    func applyChanges() async {
        for await _ in changes {
            let changed = changedActivities.withLock { pending in
                defer { pending.removeAll(keepingCapacity: true) }
                return pending
            }
            for id in changed {
                guard let activity = current[id] else { continue }
                publish(activity)
            }
        }
    }

    /// The activities current on this node.
    public var currentActivities: [UserActivity] { Array(current.activities) }

    // MARK: Publishing

    func envelope(_ body: WireEnvelope.OneOf_Body, correlationID: UInt64 = 0) -> [UInt8] {
        sequence += 1
        let envelope = WireEnvelope(body: body, sender: info.wire, sequence: sequence, correlationID: correlationID)
        // Encoding a proto3 message cannot fail: there are no required fields.
        return try! envelope.serializedBytes()
    }

    /// Publishes one bus message; `false` when it was not sent (over the frame limit, or dropped).
    @discardableResult
    func sendOnBus(topic: [UInt8], _ body: WireEnvelope.OneOf_Body) -> Bool {
        let bytes = envelope(body)
        // Over the contract's frame limit, the bus would hang up on this node: never send it. (An
        // activity changed while current, past WireLimits.maxAdvertisedText, is the way here.)
        guard bytes.count <= WireLimits.maxBusFrame, topic.count <= WireLimits.maxBusFrame else {
            logger.error("not publishing a \(bytes.count)-byte bus message: over the contract's \(WireLimits.maxBusFrame)-byte frame limit")
            return false
        }
        do {
            // XPUB never blocks: at the high-water mark it drops, and presence re-sends later.
            guard try publisher.trySend(topic, more: true), try publisher.trySend(bytes) else { return false }
            metrics.sent(on: .bus, bytes: topic.count + bytes.count)
            return true
        } catch {
            logger.warning("could not publish on the bus: \(error)")
            return false
        }
    }

    func publish(_ activity: UserActivity) {
        guard let advertisement = advertisement(of: activity) else {
            publishWithdrawal(of: activity, reason: .resigned)
            return
        }
        sendOnBus(topic: Topic.activity(activity.activityType), .advertisement(advertisement))
    }

    /// What the bus hears of a current activity; `nil` while it is not eligible for Handoff.
    func advertisement(of activity: UserActivity) -> WireAdvertisement? {
        guard activity.isEligibleForHandoff else { return nil }
        return activity.advertisement(
            origin: info.wire, continueEndpoint: continuationEndpoint,
            lease: configuration.effectiveLease, defaultTeamID: configuration.teamID)
    }

    func publishWithdrawal(of activity: UserActivity, reason: RemovalReason) {
        var withdrawal = WireWithdrawal()
        withdrawal.activityID = activity.id
        withdrawal.activityType = activity.activityType
        withdrawal.origin = info.wire
        withdrawal.reason = reason.wire
        sendOnBus(topic: Topic.activity(activity.activityType), .withdrawal(withdrawal))
    }

    /// Sends presence every interval, advertises every current activity again every refresh
    /// interval, and expires what was not heard of in time.
    func tick() async {
        let interval = configuration.advertiseInterval
        let sweep = min(configuration.effectiveLease / 4, configuration.streamIdleTimeout / 4,
                        configuration.continueTimeout / 4, .milliseconds(250))
        var nextPresence = ContinuousClock.now + interval
        var nextRefresh = ContinuousClock.now + configuration.refreshInterval
        var lastPresence = ContinuousClock.now
        while !Task.isCancelled {
            // Sweep often enough for leases and timeouts, and wake exactly when presence is due.
            do { try await Task.sleep(until: min(.now + sweep, nextPresence), clock: .continuous) } catch { return }
            let now = ContinuousClock.now
            expireKnown(now: now)
            expireSnapshots(now: now)
            resynchronizeIfDue(now: now)
            expirePending(now: now)
            superviseStreams(now: now)
            guard now >= nextPresence else { continue }
            nextPresence = now + interval
            metrics.state(streams: streams.count, current: current.count, known: known.count, onBus: busHealth.isOnBus)
            pruneClients()
            pruneSequences(now: now)
            for activity in current.activities {
                if let expiration = activity.expirationDate, expiration <= Date() {
                    activity.detach()
                    remove(activity, reason: .expired)
                }
            }
            if now >= nextRefresh {
                nextRefresh = now + configuration.refreshInterval
                for activity in current.activities { publish(activity) }
            } else if now - lastPresence > configuration.effectiveLease {
                // The presence is later than a lease (this node stalled: a flood of work, a pause):
                // every receiver's lease of its activities ran out. They hear them all again.
                logger.info("this node's presence is \((now - lastPresence).seconds) s late, more than its lease; advertising every current activity again")
                readvertise(askedByBroker: false)
            }
            lastPresence = now
            publishPresence()
        }
    }

    /// Sends this node's `NodePresence`: the ids of its current activities, and its lease.
    func publishPresence() {
        var presence = WireNodePresence()
        presence.node = info.wire
        presence.continueEndpoint = continuationEndpoint
        presence.leaseMs = UInt32(clamping: configuration.effectiveLease.milliseconds)
        // What fits the frame limit, with room for the envelope; the rest are renewed by
        // their refresh, and receivers told not to drop what is not listed.
        var budget = WireLimits.maxBusFrame - 1_024 - presence.node.publicKey.count - presence.continueEndpoint.utf8.count
        for activity in current.activities where activity.isEligibleForHandoff {
            budget -= activity.id.utf8.count + 3
            guard budget > 0 else {
                presence.partial = true
                break
            }
            presence.activityIds.append(activity.id)
        }
        sendOnBus(topic: Array((Topic.presencePrefix + id).utf8), .nodePresence(presence))
    }

    /// Answers what the publisher hears. With brokers: a broker's subscribe-all, which arrives
    /// whenever this node (re)connects to it, gets every current activity at once, so a restarted
    /// broker's cache fills right away. In direct mode (the XPUB is verbose): a peer's snapshot
    /// subscription gets this node's matching activities under that topic alone (wire.proto,
    /// "Snapshots"); a plain subscription gets nothing, so no peer hears what it knows again.
    func answerSubscriptions() async {
        while !Task.isCancelled {
            guard let frame = try? await publisher.receive() else { return }
            let bytes = frame.bytes
            guard bytes.first == 1 else { continue }
            let topic = bytes.dropFirst()
            switch configuration.bus {
            case .broker, .brokers:
                // A broker's subscribe-all (a caching broker forwards nothing else), or its request
                // that this node advertise again what its cache lost.
                if topic.isEmpty || topic.elementsEqual(readvertiseTopic) { readvertise(askedByBroker: !topic.isEmpty) }
            case .direct:
                guard let typePrefix = Topic.snapshotTypePrefix(topic) else { continue }
                answerSnapshot(topic: Array(topic), typePrefix: typePrefix)
            }
        }
    }

    /// Publishes this node's current activities of `typePrefix` under a peer's snapshot topic,
    /// then the `SnapshotReply` that says how many there were.
    func answerSnapshot(topic: [UInt8], typePrefix: String) {
        var count = 0
        for activity in current.activities where activity.activityType.hasPrefix(typePrefix) {
            guard let advertisement = advertisement(of: activity) else { continue }
            if sendOnBus(topic: topic, .advertisement(advertisement)) { count += 1 }
        }
        sendOnBus(topic: topic, .snapshotReply(WireSnapshotReply(count: count, typePrefix: typePrefix)))
    }
}
