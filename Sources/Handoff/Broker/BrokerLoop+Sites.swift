import HandoffWire
import Logging
import ZeroMQ

/// Carries out what ``BrokerCore`` decides for the sites joined below this broker (wire.proto,
/// "Sites"): their messages sent up, their interest, and the copies sent down to them.
extension BrokerLoop {
    /// A message a site's broker sent up: topic, envelope, ``HandoffWire/WireSiteHop``.
    func fromSite(_ frames: [Frame]) throws(ZMQError) {
        if secure {
            // Only a relay's connection (`--relay`) carries other nodes' messages.
            let key = connectionKey(of: frames[2])
            guard relayKeys.contains(key) else {
                core.siteMessageRefused()
                publishCounters()
                if let line = refusals.forged("sends a site's messages, but its key is no relay's (--relay)", key: key) {
                    logger.warning("\(line)")
                }
                return
            }
        }
        guard let hop = WireSiteHop(frame: frames[2]) else {
            core.droppedOverlong(fromPublisher: true)
            publishCounters()
            return
        }
        let message = [frames[0], frames[1]]
        let verdict = core.siteMessage(message, hop: hop, now: .now)
        publishCounters()
        guard case .forward(let publisherVerdict, let onward) = verdict else { return }
        try carryOut(publisherVerdict, message, hop: onward.frame, fromSite: hop.via, connectionKey: nil)
    }

    /// A bus message (topic, envelope) to each site below that follows its topic, but `excluded`.
    func sendToSites(_ frames: some MessageFrames, hop: Frame, excluding excluded: String?) throws(ZMQError) {
        let topics = frames.withBytes(ofFrame: 0) { core.siteTopics(for: $0, excluding: excluded) }
        guard !topics.isEmpty else { return }
        let envelope = frames.frame(1)
        for topic in topics { try send([Frame(topic), envelope, hop], to: backend) }
    }

    /// A subscription to a site topic (a site below following a prefix) taken, or refused and
    /// logged; false when it is no site's.
    func tookSiteSubscription(_ frame: Frame) throws(ZMQError) -> Bool {
        // A site's name is bound to the key that subscribes under it (XPUB hands each
        // subscription over with its connection's metadata): a member cannot make up names to
        // have each message sent once per name, nor follow more under a real site's.
        let key = subscriberKey(frame)
        switch core.siteSubscription(frame, key: key, relay: isRelay(key)) {
        case .notSite:
            return false
        case .ignored:
            publishCounters()
            // libzmq's own withdrawal (no key): no connection holds that site topic now, so
            // what was forwarded for it goes (a name taken over by a relay kept it).
            if key == nil, frame.withUnsafeBytes({ $0.first }) == 0 { try forwardSiteInterest(frame, key: nil) }
        case .taken:
            try fromSiteSubscriber(frame, key: key)
        case .refused(let site, let refusal):
            publishCounters()
            if let capture { try send([frame], to: capture) }
            if let line = refusals.siteInterest(site: site, refusal) { logger.warning("\(line)") }
        }
        return true
    }

    /// A site's (un)subscription, counted and kept by the core: copied to the capture, passed on
    /// upstream as this site's own interest, and, without the cache (whose frontend hears
    /// everything), to the publishers, so that they send what the site follows.
    private func fromSiteSubscriber(_ frame: Frame, key: [UInt8]?) throws(ZMQError) {
        publishCounters()
        if let capture { try send([frame], to: capture) }
        try forwardSiteInterest(frame, key: key)
    }

    /// A site's interest on to the publishers (without the cache) and upstream.
    private func forwardSiteInterest(_ frame: Frame, key: [UInt8]?) throws(ZMQError) {
        if !core.cacheEnabled {
            switch core.forwardToPublishers(frame.bytes, key: key, relay: isRelay(key), now: .now) {
            case .forwardToPublishers(let send): try self.send([Frame(send)], to: frontend)
            case .publishersSendEverything: try publishersSendEverything()
            default: break
            }
        }
        if !upstreamLinks.isEmpty { try passInterestUpstream(frame, key: key) }
    }
}
