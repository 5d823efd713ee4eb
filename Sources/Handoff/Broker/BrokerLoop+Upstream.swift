import Foundation
import HandoffWire
import Logging
import ZeroMQ

/// A link to an upstream broker: an XPUB to its frontend (this site's publishers' messages go up;
/// its subscriptions come back) and an XSUB to its backend (what this site's subscribers follow
/// comes down; their subscriptions go up).
struct UpstreamLink {
    let up: Socket
    let down: Socket
}

extension BrokerLoop {
    /// An upstream broker's subscription: its XSUB's subscribe-all when the link comes up, a
    /// token passed down from a link that came up further above (``UpstreamCascades``), or a
    /// request that a node of this site advertise again. Passed to this site's publishers (a node
    /// re-advertises what it has current on each). A link that came up also asks upstream again
    /// for the snapshot of every type this site follows: what the other sites changed while it
    /// was cut off comes down at once.
    func fromUpstreamSubscriber(_ frames: [Frame]) throws(ZMQError) {
        guard frames.count == 1 else { return }
        for subscription in core.upstreamSubscription(frames[0], now: .now, token: Topic.newSnapshotToken) { try passToPublishers(subscription) }
    }

    /// An upstream link's connection came up: the subscriptions held back as repeats in the
    /// second before were its own, and pass now.
    func upstreamLinkConnected() throws(ZMQError) {
        for subscription in core.upstreamLinkConnected(now: .now, token: Topic.newSnapshotToken) { try passToPublishers(subscription) }
    }

    /// Each round of the loop: snapshots upstream never ended given up, and the upstream's
    /// subscriptions held back as repeats whose second has ended passed on.
    func upstreamHousekeeping(now: ContinuousClock.Instant) throws(ZMQError) {
        try expireUpstreamSnapshots(now: now)
        guard let due = inPlace({ $0.upstreamSubscriptions.nextDue }), due <= now else { return }
        for subscription in core.dueUpstreamSubscriptions(now: now, token: Topic.newSnapshotToken) { try passToPublishers(subscription) }
    }

    private func passToPublishers(_ subscription: [UInt8]) throws(ZMQError) {
        _ = try frontend.trySend(subscription)
        guard UpstreamCascades.isSubscribeAll(subscription) else { return }
        for typePrefix in core.upstreamInterest.activityTypePrefixes {
            guard let topic = upstreamSnapshots.ask(typePrefix, now: .now) else { continue }
            for link in upstreamLinks { _ = try link.down.trySend([1] + topic) }
        }
    }

    /// A bus message from upstream: an answer to a snapshot this broker asked for, or a live one,
    /// addressed to this site (topic `L:` + site + `|` + its bus topic, envelope, hop).
    func fromUpstream(_ frames: [Frame]) throws(ZMQError) {
        if frames.count == 2, upstreamSnapshots.awaitsAnswers, case let topic = frames[0].bytes, upstreamSnapshots.typePrefix(of: topic) != nil {
            try fromUpstreamSnapshot(frames, topic: topic)
            return
        }
        guard frames.count == 3, let (site, topic) = Topic.splitSite(frames[0].bytes), site.elementsEqual(core.site.bytes),
              let hop = WireSiteHop(frame: frames[2]) else {
            core.droppedOverlong(fromPublisher: false)
            publishCounters()
            return
        }
        guard let onward = core.hopFromUpstream(hop) else {
            publishCounters()
            return
        }
        let message = [Frame(topic), frames[1]]
        let verdict = core.upstreamMessage(message, fromSite: hop.via, now: .now)
        publishCounters()
        guard case .forward(let askToReadvertise, let trace) = verdict else { return }
        let received = trace == nil ? nil : Date()
        if let origin = askToReadvertise { try askUpstreamToReadvertise(origin) }
        let forwarded = trace == nil ? nil : Date()  // as it is handed on (see carryOut)
        try send(message, to: backend)
        if let capture { try send(message, to: capture) }
        try sendToSites(message, hop: onward.frame, excluding: hop.origin)
        if let trace, let received, let forwarded { try reportHops(trace, received: received, forwarded: forwarded) }
    }

    /// An advertisement of an upstream snapshot goes on its live topic to this site's subscribers
    /// when it is news here; the reply ends the request.
    private func fromUpstreamSnapshot(_ frames: [Frame], topic: [UInt8]) throws(ZMQError) {
        let now = ContinuousClock.now
        if let type = frames[1].withUnsafeBytes({ WireBusSummary.advertisedType($0) }) {
            upstreamSnapshots.advertisementArrived(on: topic, now: now)
            guard let live = core.upstreamSnapshotAdvertisement(frames[1], type: type, now: now) else { return }
            publishCounters()
            let message = [Frame(live), frames[1]]
            try send(message, to: backend)
            if let capture { try send(message, to: capture) }
            try sendToSites(message, hop: localHop, excluding: nil)
            return
        }
        // A SnapshotReply is far smaller than an advertisement: decode only small envelopes.
        guard frames[1].count < 512, let envelope = try? frames[1].envelope(),
              case .snapshotReply(let reply) = envelope.body else { return }
        guard upstreamSnapshots.replyArrived(on: topic, count: Int(reply.count), now: now, jitter: .random(in: 0..<1)) else { return }
        for link in upstreamLinks { _ = try link.down.trySend([0] + topic) }
    }

    /// A subscriber's (un)subscription at this site (a node's, or a lower site's) goes upstream
    /// as this site's interest (snapshot requests stay here); a first subscription to activities
    /// also asks upstream for its snapshot, and the last one's withdrawal drops that request.
    /// `key`: the subscriber's connection key on a secure broker.
    func passInterestUpstream(_ frame: Frame, key: [UInt8]?) throws(ZMQError) {
        let interest = core.interestUpstream(frame, key: key, relay: isRelay(key))
        guard let send = interest.send else {
            publishCounters()
            return
        }
        for link in upstreamLinks { _ = try link.down.trySend(send) }
        if let typePrefix = interest.snapshotNoLongerOf {
            for topic in upstreamSnapshots.cancel(typePrefix, now: .now) {
                for link in upstreamLinks { _ = try link.down.trySend([0] + topic) }
            }
        }
        guard let typePrefix = interest.snapshotOf, let topic = upstreamSnapshots.ask(typePrefix, now: .now) else { return }
        logger.debug("asking upstream for its snapshot of \(typePrefix)")
        for link in upstreamLinks { _ = try link.down.trySend([1] + topic) }
    }

    /// Ends snapshots upstream that are over by time (one of a pair never replied; none began: it
    /// restarted, or the link broke), and asks again for those whose backoff after a short answer
    /// is over, and for those that waited their turn.
    private func expireUpstreamSnapshots(now: ContinuousClock.Instant) throws(ZMQError) {
        guard !upstreamSnapshots.isIdle else { return }
        for topic in upstreamSnapshots.expired(now: now) {
            for link in upstreamLinks { _ = try link.down.trySend([0] + topic) }
        }
        for topic in upstreamSnapshots.dueRetries(now: now) {
            logger.debug("asking upstream for a snapshot that came short or waited its turn: \(String(decoding: topic, as: UTF8.self))")
            for link in upstreamLinks { _ = try link.down.trySend([1] + topic) }
        }
    }

    /// Asks, through upstream, that a node of another site advertise again what this site's cache
    /// lacks: "R:" + its id, subscribed and withdrawn at once (the upstream passes it to its
    /// publishers, the other sites' brokers to theirs).
    private func askUpstreamToReadvertise(_ origin: String) throws(ZMQError) {
        let topic = Array((Topic.readvertisePrefix + origin).utf8)
        logger.debug("a presence from upstream lists activities of \(origin) the cache lacks; asking it to advertise them again")
        for link in upstreamLinks {
            _ = try link.down.trySend([1] + topic)
            _ = try link.down.trySend([0] + topic)
        }
    }
}
