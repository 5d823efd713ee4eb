import HandoffWire
import ZeroMQ

/// A site's broker joined to an upstream broker (`handoff broker --upstream`): what it does with
/// what comes down from upstream, and which of its own subscribers' interest goes up.
///
/// Everything its own publishers send goes up (the upstream caches every site's activities); only
/// what some node of this site subscribed to comes down. A message about a node heard on this
/// broker's own frontend lately is this site's own, come back: dropped, so nothing returns to the
/// site it came from. What comes down is cached and passed to this site's subscribers, never up
/// again, so nothing loops.
extension BrokerCore {
    /// What to do with a bus message from upstream.
    enum UpstreamVerdict: Equatable {
        /// Pass it to this site's subscribers (not upstream again); first ask upstream that
        /// `askToReadvertise`, a node of another site, advertise again what the cache lacks;
        /// report this broker's hops of a traced message.
        case forward(askToReadvertise: String?, trace: Trace? = nil)
        /// This site's own message come back, or one that cannot be cached: dropped.
        case drop
    }

    /// A bus message from upstream (the upstream checked its sender).
    ///
    /// - Parameter fromSite: The site whose link it came over (the hop's `via`: the upstream's).
    mutating func upstreamMessage(_ frames: [Frame], fromSite: String? = nil, now: ContinuousClock.Instant) -> UpstreamVerdict {
        var size = 0
        for frame in frames { size += frame.count }
        counted.upstreamIn += 1
        let content = BrokerBusContent(frames)
        if content.isMalformed {
            counted.malformed += 1
            return .drop
        }
        if let origin = content.originID, localOrigins.contains(origin, now: now) {
            counted.upstreamReturned += 1
            return .drop
        }
        // The activity looked up once, for the pair's copy and the cache.
        var lookup: LastValueCache.Lookup?
        if let id = content.activityIDRange { lookup = cache.lookUp(id, inEnvelopeOf: frames) }
        // A pair upstream sends everything down twice: the second copy is no news (an
        // advertisement by its version, a presence or a withdrawal by its very bytes).
        if upstreams > 1 {
            switch content.fields?.body {
            case .advertisement(_, _, let version, _, _):
                if let lookup, let cached = cache.version(of: lookup), cached >= version {
                    counted.upstreamDuplicates += 1
                    return .drop
                }
            case .presence, .withdrawal:
                if recentCopies.isCopy(frames[1], now: now) {
                    counted.upstreamDuplicates += 1
                    return .drop
                }
            case .other, nil:
                break
            }
        }
        switch take(content, now: now, fromUpstream: true, site: fromSite, lookup: lookup) {
        case .overQuota, .overKeyQuota:
            counted.overQuota += 1
            return .drop
        case .taken(let askToReadvertise, let stored):
            counted.messagesOut += 1
            counted.bytesOut += size
            return .forward(askToReadvertise: askToReadvertise, trace: trace(of: content, stored: stored, now: now))
        }
    }

    /// An advertisement of a snapshot this broker asked upstream for (for a type prefix its site
    /// newly follows): cached; returns the live topic to pass it to this site's subscribers on,
    /// when it is news here. `type`: its activity type (``WireBusSummary/advertisedType(_:)``).
    mutating func upstreamSnapshotAdvertisement(_ envelope: Frame, type: String, now: ContinuousClock.Instant) -> [UInt8]? {
        let topic = Topic.activity(type)
        let frames = [Frame(topic), envelope]
        let content = BrokerBusContent(frames)
        guard let advertisement = content.advertisement else { return nil }
        // This site's own, come back (an upstream that cannot tell which site asked: an older one).
        guard !localOrigins.contains(content.string(advertisement.origin.id), now: now) else {
            counted.upstreamReturned += 1
            return nil
        }
        let lookup = cache.lookUp(advertisement.activityID, inEnvelopeOf: frames)
        if let cached = cache.version(of: lookup), cached >= advertisement.version {
            // No news here, but the version held renews its lease, as a refresh would: the
            // answer to a link that came back is what repairs a copy whose lease ran down while
            // the link was away (found by the simulator at four sites, seed 311182953: the
            // copy lapsed half a second later, and this site's nodes asked its cache in vain).
            if cached == advertisement.version { _ = take(content, now: now, fromUpstream: true, lookup: lookup) }
            return nil
        }
        guard case .taken = take(content, now: now, fromUpstream: true, lookup: lookup) else { return nil }
        counted.upstreamIn += 1
        counted.messagesOut += 1
        counted.bytesOut += topic.count + envelope.count
        return topic
    }

    /// What to pass to this site's publishers now for an upstream's subscription (its
    /// subscribe-all when the link comes up, a token passed down from above, a request to
    /// re-advertise), each subscribed and withdrawn at once; for an upstream's withdrawal,
    /// nothing. A token passes the first time it is heard (``UpstreamCascades``); the others at
    /// most once a second, a repeat held back and passed when the second ends
    /// (``UpstreamSubscriptionGate``), so that links misconfigured into a loop stop passing a
    /// request round; a subscribe-all goes on as a fresh token. `token`: randomness for it.
    mutating func upstreamSubscription(_ frame: Frame, now: ContinuousClock.Instant, token: () -> String) -> [[UInt8]] {
        let bytes = frame.bytes
        // A withdrawal passes nowhere (``UpstreamCascades/publishing(_:now:token:)`` says why), and
        // so is not the gate's either.
        guard bytes.first == 1 else { return [] }
        if UpstreamCascades.isToken(bytes) { return upstreamCascades.publishing(bytes, now: now, token: token) }
        guard upstreamSubscriptions.offer(bytes, now: now) else { return [] }
        return upstreamCascades.publishing(bytes, now: now, token: token)
    }

    /// The repeats held back whose second ended: passed to this site's publishers now.
    mutating func dueUpstreamSubscriptions(now: ContinuousClock.Instant, token: () -> String) -> [[UInt8]] {
        upstreamSubscriptions.due(now: now).flatMap { upstreamCascades.publishing($0, now: now, token: token) }
    }

    /// An upstream link's connection came up (libzmq's `connected`, before its handshake): the
    /// subscriptions to pass to this site's publishers now, those held back in the last second;
    /// from now on, the next one of each passes.
    mutating func upstreamLinkConnected(now: ContinuousClock.Instant, token: () -> String) -> [[UInt8]] {
        upstreamSubscriptions.linkConnected(now: now).flatMap { upstreamCascades.publishing($0, now: now, token: token) }
    }

    /// What a subscriber's (un)subscription here means upstream.
    struct InterestUpstream: Equatable {
        /// A frame to send up, if any.
        var send: [UInt8]?
        /// The type prefix to ask upstream's snapshot of: a first subscription to activities (a
        /// node's, or a lower site's).
        var snapshotOf: String?
        /// The type prefix whose snapshot upstream is wanted no more: its last follower went.
        var snapshotNoLongerOf: String?
    }

    /// What goes upstream for a subscriber's (un)subscription here (``ForwardedInterest``).
    /// `key`: the subscriber's connection key on a secure broker, and whether it is a relay's.
    mutating func interestUpstream(_ frame: Frame, key: [UInt8]?, relay: Bool) -> InterestUpstream {
        let send: [UInt8]
        switch upstreamInterest.forward(frame.bytes, key: key, relay: relay) {
        case .nothing:
            return InterestUpstream()
        case .refused:
            counted.upstreamInterestsRefused += 1
            return InterestUpstream()
        case .send(let frame):
            send = frame
        }
        guard let (_, prefix) = Topic.splitSite(send.dropFirst()), prefix.starts(with: Topic.activityPrefix.utf8) else {
            return InterestUpstream(send: send)
        }
        let typePrefix = String(decoding: prefix.dropFirst(Topic.activityPrefix.utf8.count), as: UTF8.self)
        return send.first == 1 ? InterestUpstream(send: send, snapshotOf: typePrefix) : InterestUpstream(send: send, snapshotNoLongerOf: typePrefix)
    }
}
