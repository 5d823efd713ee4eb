import ArgumentParser
import CoreMetrics
import Handoff
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle

/// `--metrics HOST:PORT`, for the commands that run a long time (broker, agent).
struct MetricsOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Serve Prometheus metrics at http://HOST:PORT/metrics and a health check at /healthz (200 healthy, 503 not), e.g. 127.0.0.1:9464.",
        valueName: "host:port"))
    var metrics: String?
    @Option(help: ArgumentHelp(
        "Who may load the live page of the bus at http://HOST:PORT/ (with --metrics): loopback (clients on this machine, the default), anywhere, or off.",
        valueName: "access"))
    var livePage: LivePageAccess?

    /// Who may load the live page: the flag's choice, else `fallback` (an agent's configuration
    /// file), else loopback.
    func livePageAccess(fallback: LivePageAccess? = nil) -> LivePageAccess { livePage ?? fallback ?? .loopback }

    func validate() throws {
        if let metrics { _ = try Self.parse(metrics) }
    }

    /// Where a served page is asked for (`health`, `top --from`): `host:port`, or a URL of it as a
    /// browser shows the live page (`http://127.0.0.1:9464/`, `…/healthz`), whose path is ignored.
    static func parseServed(_ address: String) throws -> (host: String, port: Int) {
        var text = Substring(address)
        if text.lowercased().hasPrefix("https://") {
            throw ValidationError("\(address): the metrics address serves plain HTTP (http://HOST:PORT, or HOST:PORT)")
        }
        if text.lowercased().hasPrefix("http://") {
            text = text.dropFirst("http://".count)
            if let slash = text.firstIndex(of: "/") { text = text[..<slash] }
        }
        guard !text.contains("/"), let parsed = try? parse(String(text)) else {
            throw ValidationError("\(address): expected HOST:PORT or http://HOST:PORT, e.g. 127.0.0.1:9464")
        }
        return parsed
    }

    /// Splits `host:port` (`[::1]:9464` for IPv6; `:9464` for every interface).
    static func parse(_ address: String) throws -> (host: String, port: Int) {
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]),
              (0...65_535).contains(port) else {
            throw ValidationError("--metrics \(address): expected HOST:PORT, e.g. 127.0.0.1:9464")
        }
        var host = String(address[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host.isEmpty ? "0.0.0.0" : host, port)
    }

    /// Makes swift-prometheus the process's metrics backend, with each family's help text
    /// (``DescribedMetricsFactory``), when `--metrics` was given. Must run before the broker or
    /// node is made: they make their metric handles when they start.
    func bootstrap() -> PrometheusCollectorRegistry? { Self.bootstrap(metrics) }

    /// ``bootstrap()`` for an address that may come from elsewhere (an agent's configuration file).
    static func bootstrap(_ address: String?) -> PrometheusCollectorRegistry? {
        guard address != nil else { return nil }
        let registry = PrometheusCollectorRegistry()
        var factory = DescribedMetricsFactory(registry: registry)
        // Continue round trips take a few hundred microseconds on a LAN, seconds on a bad link.
        factory.durationHistogramBuckets["handoff_node_continue_duration_seconds"] = [
            .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5), .milliseconds(5),
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
            .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
        ]
        MetricsSystem.bootstrap(factory)
        return registry
    }
}

/// Whether the process is healthy, and why.
struct HealthReport: Sendable {
    var healthy: Bool
    var reason: String
}

/// The HTTP server of `--metrics`: `GET /metrics` (Prometheus' text format: the registry's
/// metrics, the `process_*` ones and `handoff_build_info`), `GET /healthz`, and the live page of
/// the bus (``LivePage``: `/`, `/view.json`, `/events`) when given an observer.
enum MetricsEndpoint {
    /// The most connections served at once: scrapers and health checks need few, and a client
    /// opening thousands must not cost this process memory.
    static let maxConnections = 32

    /// The server, as a service for the command's service group.
    static func service(
        address: String, registry: PrometheusCollectorRegistry, logger: Logger,
        page: (observer: BusObserver, access: LivePageAccess)? = nil,
        health: @escaping @Sendable () async -> HealthReport
    ) throws -> some Service {
        let (host, port) = try MetricsOptions.parse(address)
        let router = Router(context: ServerRequestContext.self)
        if let page { LivePage.addRoutes(to: router, observer: page.observer, access: page.access) }
        let process = ProcessMetrics(registry: registry)
        router.get("metrics") { _, _ -> Response in
            process.update()
            var buffer: [UInt8] = []
            buffer.reserveCapacity(16 * 1024)
            registry.emit(into: &buffer)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: buffer)))
        }
        router.get("healthz") { _, _ -> Response in
            let report = await health()
            return Response(
                status: report.healthy ? .ok : .serviceUnavailable, headers: [.contentType: "text/plain; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: (report.healthy ? "ok: " : "unavailable: ") + report.reason + "\n")))
        }
        return Application(
            router: router,
            configuration: ApplicationConfiguration(
                address: .hostname(host, port: port), serverName: "handoff",
                availableConnectionsDelegate: MaximumAvailableConnections(maxConnections)),
            onServerRunning: { channel in
                let bound = channel.localAddress.map { "\($0.ipAddress ?? host):\($0.port ?? port)" } ?? "\(host):\(port)"
                let pageNote = page.map { $0.access == .off ? "" : ", the live page at http://\(bound)/" } ?? ""
                logger.info("metrics at http://\(bound)/metrics, health at http://\(bound)/healthz\(pageNote)")
            },
            logger: logger)
    }
}
