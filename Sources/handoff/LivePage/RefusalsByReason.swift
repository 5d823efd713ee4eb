import Handoff

// What the live page's "Refusals" table shows: the serving process's own counters, under the
// `reason` labels their `…_refusals_total` metrics carry (and malformed input beside them).

extension Broker.Counters {
    var refusalsByReason: [String: UInt64] {
        var reasons: [String: UInt64] = [
            "forged": UInt64(forged), "over_quota": UInt64(overQuota), "malformed": UInt64(malformed),
            "subscriptions_over_bound": UInt64(subscribersCut), "unfinished_message": UInt64(unfinishedMessagesCut),
        ]
        for reason in HandshakeRefusals.Reason.allCases { reasons[reason.label] = UInt64(handshakeRefusals[reason]) }
        return reasons
    }
}

extension Node.SecurityCounters {
    var refusalsByReason: [String: UInt64] {
        var reasons: [String: UInt64] = [
            "replayed": UInt64(replayedIgnored), "stale": UInt64(staleIgnored), "foreign": UInt64(foreignIgnored),
            "over_quota": UInt64(overQuotaIgnored), "malformed_bus": UInt64(malformedBus),
            "malformed_continuation": UInt64(malformedContinuation), "subscriptions_over_bound": UInt64(subscribersCut),
            "unfinished_message": UInt64(unfinishedMessagesCut),
        ]
        for reason in HandshakeRefusals.Reason.allCases { reasons[reason.label] = UInt64(handshakeRefusals[reason]) }
        return reasons
    }
}
