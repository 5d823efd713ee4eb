import HandoffWire
import ZeroMQ

/// The broker's sockets, made, set and bound (or connected: the links to an upstream) on the
/// caller's thread before the loop's thread starts; from then on only that thread uses them.
struct BrokerSockets {
    let frontend: Socket
    let backend: Socket
    let capture: Socket?
    let upstreamLinks: [UpstreamLink]
    /// Monitors of the frontend, backend and capture: each connection accepted, and (secure)
    /// handshakes that fail before ZAP.
    let connectionMonitors: [SocketMonitor]
    /// Monitors of the links' up sockets for their connections coming up (``BrokerCore/upstreamLinkConnected(now:token:)``,
    /// and watched as the accepted ones are, ``UnfinishedMessageBound``).
    let linkMonitors: [SocketMonitor]
    /// Monitors of the links' down sockets for their connections coming up, watched likewise.
    let downLinkMonitors: [SocketMonitor]
    let endpoints: BoundEndpoints

    /// The linger of the sockets that send the bus's two-frame messages (the backend, the capture,
    /// a link's up socket); the others keep 0. With linger 0, libzmq 4.3.4 aborts the process when
    /// such a socket closes while a peer's connection drops at the same moment (a site stopping
    /// at once) and a message was half taken for that peer: the session then finds its pipe
    /// closed to reads and asserts (docs/operations.md, "Stopping under load"). With a linger,
    /// the pipe stays readable while it runs, so a connection that drops meanwhile finds the rest
    /// of the message; it costs a stopping broker at most this long, and only towards a peer that
    /// does not read.
    static let sendingLinger: Int32 = 200

    /// A link's down socket's send queue: what this site follows upstream (at most
    /// ``ForwardedInterest/maxPrefixes``) and the snapshot requests for it, sent again whole on
    /// every reconnection.
    static let linkSubscriptionQueue = Int32(4 * ForwardedInterest.maxPrefixes)

    /// Opens every socket the configuration asks for; when one fails, closes those it opened and
    /// throws (a taken port, a bad endpoint).
    static func open(_ configuration: Broker.Configuration, context: Context) throws(ZMQError) -> BrokerSockets {
        var opened: [Socket] = []
        func open(_ type: SocketType, linger: Int32 = 0) throws(ZMQError) -> Socket {
            let socket = try context.socket(type)
            opened.append(socket)
            try socket.set(.linger, linger)
            return socket
        }
        do {
            let hwm = configuration.highWaterMark
            let security = configuration.security
            func secure(_ socket: Socket) throws(ZMQError) {
                try security?.secureServer(socket, domain: Broker.zapDomain)
            }
            let frontend = try open(.xsub)
            try secure(frontend)
            try frontend.set(.receiveHighWaterMark, configuration.publisherQueue)
            try frontend.set(.sendHighWaterMark, hwm)
            // The contract's frame limit: a larger frame (or handshake command) disconnects its sender.
            try frontend.set(.maxMessageSize, Int64(WireLimits.maxBusFrame))
            try frontend.bind(configuration.frontend)
            let backend = try open(.xpub, linger: Self.sendingLinger)
            try secure(backend)
            try backend.set(.sendHighWaterMark, hwm)
            // Subscriptions in from each subscriber a few at a time (``Broker/SubscriptionBounds/receiveQueue``).
            try backend.set(.receiveHighWaterMark, Broker.SubscriptionBounds.receiveQueue)
            try backend.set(.xpubVerbose, true)
            // Subscribers send only subscriptions, and libzmq keeps each distinct one while its
            // subscriber is connected: a frame past the longest the contract makes cuts it off.
            try backend.set(.maxMessageSize, Int64(WireLimits.maxSubscriptionFrame))
            try backend.bind(configuration.backend)
            let backendEndpoint = try backend.lastEndpoint
            if let view = configuration.viewEndpoint { try backend.bind(view) }
            var capture: Socket?
            if let captureAddress = configuration.capture {
                // An XPUB, verbose, so that the broker reads each subscription its subscribers
                // make and bounds what each holds, as on the backend (a PUB keeps them unseen).
                let socket = try open(.xpub, linger: Self.sendingLinger)
                try secure(socket)
                try socket.set(.sendHighWaterMark, hwm)
                try socket.set(.receiveHighWaterMark, Broker.SubscriptionBounds.receiveQueue)
                try socket.set(.xpubVerbose, true)
                try socket.set(.maxMessageSize, Int64(WireLimits.maxSubscriptionFrame))
                try socket.bind(captureAddress)
                capture = socket
            }
            // A link to another site crosses networks that drop packets rather than connections:
            // heartbeats find a dead one in 3 s and a new connection is tried every second, so a
            // link that comes back carries traffic within about a second, not after TCP's backoff.
            func watchLiveness(_ socket: Socket) throws(ZMQError) {
                try socket.set(.heartbeatInterval, 1000)
                try socket.set(.heartbeatTimeout, 3000)
                try socket.set(.connectTimeout, 1000)
            }
            // Each link's sockets are monitored for their connections coming up before they
            // connect: libzmq's I/O thread may connect at once, and a monitor attached after
            // that never hears of the connection.
            let links = try configuration.upstreams.map { (upstream) throws(ZMQError) -> (link: UpstreamLink, up: SocketMonitor, down: SocketMonitor) in
                // Up: this site's publishers' messages, to the upstream's frontend, whose XSUB
                // subscribes to everything (and asks for re-advertising) over this XPUB.
                let up = try open(.xpub, linger: Self.sendingLinger)
                try watchLiveness(up)
                if let security, let key = security.brokerKey { try security.secureClient(up, serverKey: key) }
                try up.set(.sendHighWaterMark, hwm)
                try up.set(.xpubVerbose, true)
                try up.set(.maxMessageSize, Int64(WireLimits.maxSubscriptionFrame))
                let upMonitor = try up.monitor([.connected])
                try up.connect(upstream.frontend)
                // Down: what this site's subscribers subscribe to, from the upstream's backend.
                let down = try open(.xsub)
                try watchLiveness(down)
                if let security, let key = security.brokerKey { try security.secureClient(down, serverKey: key) }
                try down.set(.receiveHighWaterMark, hwm)
                // What the site follows goes up as subscriptions, and libzmq sends them all again
                // at once when the link reconnects (an upstream restarted): past the send queue
                // (libzmq's default 1,000) the rest were lost, and those prefixes no longer came
                // down. Room for every prefix a site may follow and a snapshot request for each.
                try down.set(.sendHighWaterMark, Self.linkSubscriptionQueue)
                try down.set(.maxMessageSize, Int64(WireLimits.maxBusFrame))
                let downMonitor = try down.monitor([.connected])
                try down.connect(upstream.backend)
                return (UpstreamLink(up: up, down: down), upMonitor, downMonitor)
            }
            let upstreamLinks = links.map(\.link)
            // Each connection accepted, for the loop to watch what it hands libzmq
            // (``UnfinishedMessageBound``). And ZAP counts the keys it refuses; a peer without
            // CURVE, or one that cannot prove the key it claims, fails before ZAP is asked, and
            // only a monitor sees it.
            let watched: MonitorEvents = security == nil ? [.accepted] : [.accepted, .handshakeFailedProtocol, .handshakeFailedNoDetail]
            let connectionMonitors = try ([frontend, backend] + (capture.map { [$0] } ?? [])).map {
                (socket: Socket) throws(ZMQError) -> SocketMonitor in try socket.monitor(watched)
            }
            let (linkMonitors, downLinkMonitors) = (links.map(\.up), links.map(\.down))
            let endpoints = BoundEndpoints(
                frontend: try frontend.lastEndpoint,
                backend: backendEndpoint,
                capture: try capture?.lastEndpoint)
            if configuration.lastValueCache {
                // Publishers (PUB) drop what nobody subscribed to. The cache must see every
                // advertisement, also those sent before the first subscriber came.
                _ = try frontend.trySend([UInt8(1)])
            }
            return BrokerSockets(
                frontend: frontend, backend: backend, capture: capture, upstreamLinks: upstreamLinks,
                connectionMonitors: connectionMonitors, linkMonitors: linkMonitors, downLinkMonitors: downLinkMonitors, endpoints: endpoints)
        } catch {
            for socket in opened { socket.close() }
            throw error
        }
    }
}
