import ArgumentParser
import Foundation
import Handoff
import Logging
import ServiceLifecycle
import UnixSignals
import ZeroMQ

/// `handoff broker`: the bus's XSUB/XPUB proxy with a last-value cache.
struct BrokerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broker",
        abstract: "Run the bus broker: publishers connect to the frontend, subscribers to the backend.")

    @Option(help: "Where publishers (nodes) connect.") var frontend = "tcp://*:5555"
    @Option(help: "Where subscribers (nodes, monitors) connect.") var backend = "tcp://*:5556"
    @Option(help: "Where a copy of all traffic is published, for monitoring.") var capture: String?
    @Flag(help: "Do not keep the last advertisement of each activity for late joiners.") var noCache = false
    @Option(help: "The most activities of one node the broker caches and forwards; its new ones beyond are dropped and counted.")
    var maxActivitiesPerNode = Broker.Configuration().maxActivitiesPerOrigin
    @Option(help: "With CURVE, the most activities of one key, over all the nodes that name it, the broker caches and forwards (default: 4 × --max-activities-per-node).")
    var maxActivitiesPerKey: Int?
    @Option(help: "The most memory, in MiB, the cache's activities take (their frames and 256 bytes each); past it those that expire soonest make room.")
    var cacheMib = Broker.Configuration().cacheBytes >> 20
    @Option(help: "How many of one publisher's messages the broker holds before TCP pushes back and the rest wait in the publisher (0: unlimited).")
    var publisherQueue = Broker.Configuration().publisherQueue
    @Option(help: "The most distinct subscriptions one subscriber's connection may hold; past it the connection is cut and counted (with CURVE, 4 × this over all the connections of one key).")
    var maxSubscriptionsPerConnection = Broker.SubscriptionBounds().perConnection
    @Option(help: "The most KiB of topic one subscriber's connection's subscriptions may take; past it the connection is cut and counted (with CURVE, 4 × this over all the connections of one key).")
    var maxSubscriptionKibPerConnection = Broker.SubscriptionBounds().bytesPerConnection >> 10
    @Option(parsing: .upToNextOption,
            help: ArgumentHelp("Join an upstream broker: its frontend and backend (repeat for a pair). This broker's nodes form a site of a wider bus: their messages go up, and what they follow comes down.",
                               valueName: "frontend backend"))
    var upstream: [String] = []
    @Option(help: ArgumentHelp("This broker's site name on the links between sites (letters, digits, '.', '_', '-'; at most 64): unique on the bus. Default: a random one each start.", valueName: "name"))
    var site: String?
    @Option(help: ArgumentHelp("With CURVE, a site broker's public key (a .pub file or Z85 text; repeatable): it joins this broker with --upstream and relays its nodes' messages, which its connection may then carry in their own names.", valueName: "key"))
    var relay: [String] = []
    @Flag(help: "Exit when the parent process exits (used by `handoff demo`).") var exitWithParent = false
    @Option(help: "Log the counters every this many seconds (0: only at exit).") var statsInterval: Double = 10
    @OptionGroup var security: SecurityOptions
    @OptionGroup var metricsOptions: MetricsOptions
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        logging.bootstrap()
        if exitWithParent { exitWhenParentExits() }
        let logger = Logger(label: "handoff.broker")
        var configuration = Broker.Configuration(frontend: frontend, backend: backend, maxActivitiesPerOrigin: maxActivitiesPerNode)
        configuration.capture = capture
        configuration.maxActivitiesPerKey = maxActivitiesPerKey
        configuration.publisherQueue = publisherQueue
        guard (1...(Int.max >> 20)).contains(cacheMib) else { throw ValidationError("--cache-mib takes a whole number of MiB, at least 1 (got \(cacheMib))") }
        configuration.cacheBytes = cacheMib << 20
        guard (1...(Int.max >> 12)).contains(maxSubscriptionsPerConnection) else {
            throw ValidationError("--max-subscriptions-per-connection takes a whole number, at least 1 (got \(maxSubscriptionsPerConnection))")
        }
        guard (1...(Int.max >> 12)).contains(maxSubscriptionKibPerConnection) else {
            throw ValidationError("--max-subscription-kib-per-connection takes a whole number of KiB, at least 1 (got \(maxSubscriptionKibPerConnection))")
        }
        configuration.subscriptionBounds = Broker.SubscriptionBounds(
            perConnection: maxSubscriptionsPerConnection, bytesPerConnection: maxSubscriptionKibPerConnection << 10,
            perKey: 4 * maxSubscriptionsPerConnection, bytesPerKey: 4 * maxSubscriptionKibPerConnection << 10)
        guard upstream.count % 2 == 0 else {
            throw ValidationError("--upstream takes two endpoints, the upstream broker's frontend and backend (got \(upstream.joined(separator: " ")))")
        }
        configuration.upstreams = stride(from: 0, to: upstream.count, by: 2).map {
            Broker.Configuration.Upstream(frontend: upstream[$0], backend: upstream[$0 + 1])
        }
        configuration.lastValueCache = !noCache
        if let site {
            guard let name = SiteName(site) else {
                throw ValidationError("--site takes 1 to 64 letters, digits, '.', '_' or '-' (got '\(site)')")
            }
            configuration.site = name
        }
        // A site's broker joined to a hub over CURVE talks to it as a node talks to its broker.
        configuration.security = try security.resolve(needsBrokerKey: !upstream.isEmpty)
        configuration.relayKeys = Set(try relay.map { try KeyFile.readPublicKey($0) })
        configuration.allowInsecure = security.allowsInsecure()
        let registry = metricsOptions.bootstrap()
        // The live page watches the backend from inside the process, without a key.
        let page = registry != nil && metricsOptions.livePageAccess() != .off
        if page { configuration.viewEndpoint = "inproc://handoff-broker-view" }
        // Its one busy thread forwards; libzmq's I/O thread sends what it queued in batches.
        let context = try Context(ioThreadScheduling: .batch)
        let broker = try Broker.start(configuration, context: context)
        let options = security
        let hangup = reloadAccountOnHangup(logger: logger, hasAccount: configuration.security != nil) {
            let keys = try options.resolve(needsBrokerKey: false)?.authorizedKeys ?? []
            try broker.updateAccount(keys)
            return keys.count
        }
        defer { hangup.cancel() }
        let ready = "broker ready" + (configuration.security == nil ? "" : " (CURVE)") + ": frontend \(broker.frontendEndpoint) backend \(broker.backendEndpoint)" + (broker.captureEndpoint.map { " capture \($0)" } ?? "")
        let status = "READY=1\nSTATUS=frontend \(broker.frontendEndpoint), backend \(broker.backendEndpoint)"
        var services: [any Service] = [broker, ReadinessAnnouncement {
            // One line on standard output that scripts (and `handoff demo`) wait for; and for
            // Type=notify units, ready: the sockets are bound and SIGTERM is a graceful stop.
            announce(ready)
            Systemd.notify(status)
        }]
        let observer = page ? BusObserver(
            BusObserver.Settings(endpoint: configuration.viewEndpoint!, source: "broker \(broker.backendEndpoint)"),
            context: context, refusals: { broker.counters.refusalsByReason }) : nil
        if let registry, let address = metricsOptions.metrics {
            let (frontend, backend) = (broker.frontendEndpoint, broker.backendEndpoint)
            services.append(try MetricsEndpoint.service(
                address: address, registry: registry, logger: logger, page: observer.map { ($0, metricsOptions.livePageAccess()) }) {
                broker.isRunning
                    ? HealthReport(healthy: true, reason: "forwarding: frontend \(frontend) and backend \(backend) bound")
                    : HealthReport(healthy: false, reason: "the broker's loop has stopped")
            })
        }
        let group = ServiceGroup(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        func report(_ message: Logger.Message) {
            let counters = broker.counters
            logger.info(message, metadata: [
                "messages-in": "\(counters.messagesIn)", "bytes-in": "\(counters.bytesIn)",
                "messages-out": "\(counters.messagesOut)", "bytes-out": "\(counters.bytesOut)",
                "subscriptions": "\(counters.subscriptions)", "cached": "\(counters.cachedActivities)", "cached-bytes": "\(counters.cachedBytes)",
                "snapshots": "\(counters.snapshots)", "over-quota": "\(counters.overQuota)", "subscribers-cut": "\(counters.subscribersCut)", "unfinished-messages-cut": "\(counters.unfinishedMessagesCut)", "forged": "\(counters.forged)", "snapshots-busy": "\(counters.snapshotsBusy)", "snapshot-advertisements": "\(counters.snapshotAdvertisements)", "malformed": "\(counters.malformed)",
                "upstream-out": "\(counters.upstreamOut)", "upstream-in": "\(counters.upstreamIn)", "upstream-returned": "\(counters.upstreamReturned)",
                "upstream-duplicates": "\(counters.upstreamDuplicates)", "sites-in": "\(counters.sitesIn)", "sites-out": "\(counters.sitesOut)",
                "site-loops": "\(counters.siteLoops)", "site-interests-refused": "\(counters.siteInterestsRefused)", "upstream-interests-refused": "\(counters.upstreamInterestsRefused)", "requests-refused": "\(counters.requestsRefused)", "readvertise-requests": "\(counters.readvertiseRequests)", "readvertise-everyone": "\(counters.readvertiseEveryone)", "readvertise-lapsed": "\(counters.readvertiseLapsed)",
                "handshakes-allowed": "\(counters.allowedHandshakes)", "handshakes-refused": "\(counters.handshakeRefusals.total)",
                "handshake-refusals": "\(HandshakeRefusals.Reason.allCases.map { "\($0.rawValue)=\(counters.handshakeRefusals[$0])" }.joined(separator: " "))",
            ])
        }
        let interval = statsInterval
        let stats = Task {
            guard interval > 0 else { return }
            while !Task.isCancelled {
                do { try await Task.sleep(for: .milliseconds(Int(interval * 1000))) } catch { return }
                report("broker counters")
            }
        }
        try await group.run()
        Systemd.notify("STOPPING=1")
        await observer?.stop()
        stats.cancel()
        report("broker stopped")
    }
}
