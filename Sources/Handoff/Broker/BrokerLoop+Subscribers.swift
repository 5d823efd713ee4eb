import HandoffWire
import Logging
import ZeroMQ

/// Carries out what ``BrokerCore`` decides for the subscribers' side: their (un)subscriptions,
/// snapshot requests and requests for the publishers, and the keys their connections hold.
extension BrokerLoop {
    /// Subscribers → publishers: one (un)subscription, or a snapshot request answered here.
    func fromSubscriber(_ frames: [Frame]) throws(ZMQError) {
        if frames.count == 1, !withinSubscriptionBounds(frames[0]) { return }
        if frames.count == 1, try tookSiteSubscription(frames[0]) { return }
        let key = frames.count == 1 ? subscriberKey(frames[0]) : nil
        let verdict = core.subscriberMessage(frames, key: key, relay: isRelay(key), now: .now)
        publishCounters()
        if let capture { try send(frames, to: capture) }
        switch verdict {
        case .forwardToPublishers(let frame):
            try send([Frame(frame)], to: frontend)
        case .publishersSendEverything:
            try publishersSendEverything()
        case .answerSnapshot(let topic, let typePrefix):
            // Queued, answered a slice a round; or answered at once (busy, or the cache off).
            if let reply = core.beginSnapshot(topic: topic, typePrefix: typePrefix, now: .now) {
                publishCounters()  // before the reply, as before every message passed on
                try send([Frame(topic), Frame(reply)], to: backend)
            }
        case .passRequest(let topic):
            try passRequest(topic, upstream: true)
            return
        case .keep:
            break
        }
        if !upstreamLinks.isEmpty, frames.count == 1 { try passInterestUpstream(frames[0], key: key) }
    }

    /// Without the cache, past the bounds of what is forwarded (``BrokerCore/forwardToPublishers(_:key:relay:now:)``).
    func publishersSendEverything() throws(ZMQError) {
        logger.warning("subscribers follow more prefixes than this broker forwards (\(ForwardedInterest.maxPrefixes) in all, \(ForwardedInterest.maxPrefixesPerKey) a key): the publishers now send it everything, as with the cache")
        try send([Frame([1])], to: frontend)
    }

    /// Asks an origin whose presence lists activities the cache lacks to advertise them again: a
    /// subscription to "R:" + its node id, sent upstream and withdrawn at once (wire.proto), so
    /// that the next one reaches its publisher too.
    func askToAdvertiseAgain(_ origin: String) throws(ZMQError) {
        logger.debug("the presence of \(origin) lists activities the cache lacks; asking it to advertise them again")
        try passRequest(Array((Topic.readvertisePrefix + origin).utf8), upstream: false)
    }

    /// A request for the publishers (``PublisherRequests``), subscribed and withdrawn at once on
    /// the frontend, and up each upstream link when `upstream`: nothing of it stands at the
    /// publishers, nor above.
    private func passRequest(_ topic: [UInt8], upstream: Bool) throws(ZMQError) {
        _ = try frontend.trySend([1] + topic)
        _ = try frontend.trySend([0] + topic)
        guard upstream else { return }
        for link in upstreamLinks {
            _ = try link.down.trySend([1] + topic)
            _ = try link.down.trySend([0] + topic)
        }
    }

    /// The key a subscriber's (un)subscription carries on a secure broker (XPUB hands each over
    /// with its connection's metadata): `nil` on an open broker, and for an unsubscription libzmq
    /// made itself (a topic's last subscriber went), which carries none. A subscription always
    /// carries one (`[]` should it ever not: bound to no member's key).
    func subscriberKey(_ frame: Frame) -> [UInt8]? {
        guard secure else { return nil }
        let userID = frame.property("User-Id")
        guard userID != nil || frame.withUnsafeBytes({ $0.first }) == 1 else { return nil }
        return Self.key(ofUserID: userID)
    }

    /// Whether a subscriber's key (``subscriberKey(_:)``) is a relay's (`--relay`).
    func isRelay(_ key: [UInt8]?) -> Bool { key.map(relayKeys.contains) ?? false }

    /// The CURVE key a frame's connection was authenticated with.
    func connectionKey(of frame: Frame) -> [UInt8] { Self.key(ofUserID: frame.property("User-Id")) }

    /// The key a "User-Id" property names (the Z85 text ZAP set); empty for none.
    private static func key(ofUserID text: String?) -> [UInt8] { text.flatMap { try? CurveKey(z85: $0).bytes } ?? [] }
}
