import Foundation
import HandoffWire

/// The messages the advertiser decides to send, as the bus carries them.
extension Advertiser {
    /// What the bus hears of a current activity; `nil` while it is not eligible for Handoff.
    func advertisement(of activity: UserActivity) -> WirePlainAdvertisement? {
        guard activity.isAdvertisable else { return nil }
        return activity.advertisement(
            origin: settings.origin, continueEndpoint: settings.continueEndpoint,
            lease: settings.lease, defaultTeamID: settings.teamID)
    }

    /// Its advertisement, or its withdrawal while it is not eligible for Handoff.
    mutating func publication(of activity: UserActivity) -> Message {
        guard let advertisement = advertisement(of: activity) else { return withdrawal(of: activity, reason: .resigned) }
        return Message(topic: topic(of: activity), advertisement: advertisement)
    }

    /// The bus topic of `activity`'s type (``lastTopic``).
    mutating func topic(of activity: UserActivity) -> [UInt8] {
        if let lastTopic, lastTopic.activityType == activity.activityType { return lastTopic.bytes }
        let bytes = Topic.activity(activity.activityType)
        lastTopic = (activity.activityType, bytes)
        return bytes
    }

    mutating func withdrawal(of activity: UserActivity, reason: RemovalReason) -> Message {
        var withdrawal = WireWithdrawal()
        withdrawal.activityID = activity.id
        withdrawal.activityType = activity.activityType
        withdrawal.origin = settings.origin
        withdrawal.reason = reason.wire
        return Message(topic: topic(of: activity), body: .withdrawal(withdrawal))
    }

    /// The `SnapshotReply` that ends an answer under a peer's snapshot topic: how many
    /// advertisements it sent (a receiver that got fewer asks again).
    func snapshotReply(topic: [UInt8], typePrefix: String, count: Int) -> Message {
        Message(topic: topic, body: .snapshotReply(WireSnapshotReply(count: count, typePrefix: typePrefix)))
    }

    /// The node's `NodePresence`: the ids of its current activities (what fits the frame limit,
    /// with room for the envelope; the rest are renewed by their refresh, and receivers are told
    /// not to drop what is not listed), its lease and its traffic.
    func presence(traffic: WireNodeTraffic = WireNodeTraffic()) -> Message {
        var presence = WireNodePresence()
        if traffic != WireNodeTraffic() { presence.traffic = traffic }
        presence.node = settings.origin
        presence.continueEndpoint = settings.continueEndpoint
        presence.leaseMs = UInt32(clamping: settings.lease.milliseconds)
        // The node's reference goes twice (the envelope's sender, the presence's node): a long
        // name or host takes room from the list, not the frame limit.
        let node = presence.node
        let reference = node.publicKey.count + node.nodeID.utf8.count + node.name.utf8.count + node.host.utf8.count
        var budget = WireLimits.maxBusFrame - 1_024 - 2 * reference - presence.continueEndpoint.utf8.count
        let unadvertised = awaitingFirstAdvertisement
        for activity in current.activities where activity.isAdvertisable {
            if !unadvertised.isEmpty, unadvertised.contains(activity.id) { continue }
            budget -= activity.id.utf8.count + 3
            guard budget > 0 else {
                presence.partial = true
                break
            }
            presence.activityIds.append(activity.id)
        }
        return Message(topic: Array((Topic.presencePrefix + settings.origin.nodeID).utf8), body: .nodePresence(presence))
    }
}
