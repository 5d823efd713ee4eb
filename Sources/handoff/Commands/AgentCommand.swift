import ArgumentParser
import Foundation
import Handoff
import HandoffWire
import Logging
import ServiceLifecycle
import SwiftProtobuf
import UnixSignals
import ZeroMQ

/// The agent's configuration file (JSON); flags override it.
struct AgentFile: Codable {
    struct BrokerEndpoints: Codable { var frontend: String; var backend: String }
    var name: String?
    var broker: BrokerEndpoints?
    var plugins: [String]?
    var data: String?
    var control: String?
    var continuation: String?
    var advertisedHost: String?
    var advertiseIntervalSeconds: Double?
    /// `--stream-stall-timeout`: seconds a stream pair may wait on its peer without progress.
    var streamStallTimeoutSeconds: Double?
    /// `--stream-checksum`: `crc32c`, `xxh64` or `sha256`.
    var streamChecksum: String?
    /// `--require-verified-stream-ends`.
    var requireVerifiedStreamEnds: Bool?
    var logLevel: String?
    /// `text` or `json`.
    var logFormat: String?
    /// Where to serve metrics and health (`HOST:PORT`), as `--metrics`.
    var metrics: String?
    /// Who may load the live page there, as `--live-page`: `loopback`, `anywhere` or `off`.
    var livePage: String?
    /// Keys: `{"key": "node.key", "account": ["folder"], "brokerKey": "broker.pub"}`.
    var security: SecurityFile?
    /// Run without CURVE beyond loopback (local development only).
    var insecure: Bool?
}

extension AgentFile {
    /// The keys a configuration file may hold, nested objects by their key (keep in step with the
    /// properties above).
    static let schema: [String: Set<String>] = [
        "": ["name", "broker", "plugins", "data", "control", "continuation", "advertisedHost",
             "advertiseIntervalSeconds", "streamStallTimeoutSeconds", "streamChecksum", "requireVerifiedStreamEnds", "logLevel", "logFormat", "metrics", "livePage", "security", "insecure"],
        "broker": ["frontend", "backend"],
        "security": ["key", "account", "brokerKey"],
    ]

    /// Reads a configuration file, refusing keys it does not know (a misspelt "security" would
    /// otherwise mean no key at all) with the closest known key as a suggestion.
    static func read(_ path: String) throws -> AgentFile {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ValidationError("cannot read the configuration \(path): \(error.localizedDescription)")
        }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw ValidationError("the configuration \(path) is not valid JSON: \(error.localizedDescription)")
        }
        guard let top = object as? [String: Any] else {
            throw ValidationError("the configuration \(path) must be a JSON object")
        }
        let sections = [("", top as Any)] + top.filter({ schema[$0.key] != nil }).map({ ($0.key, $0.value) })
        for (section, value) in sections {
            guard let fields = value as? [String: Any], let known = schema[section] else { continue }
            for key in fields.keys.sorted() where !known.contains(key) {
                let place = section.isEmpty ? "" : " in \"\(section)\""
                let closest = known.min(by: { editDistance(key, $0) < editDistance(key, $1) })
                let hint = closest.map { editDistance(key, $0) <= 3 ? "; did you mean \"\($0)\"?" : "" } ?? ""
                throw ValidationError("the configuration \(path) has an unknown key \"\(key)\"\(place)\(hint) (known: \(known.sorted().joined(separator: ", ")))")
            }
        }
        do {
            return try JSONDecoder().decode(AgentFile.self, from: data)
        } catch {
            throw ValidationError("the configuration \(path) is not a valid agent configuration: \(error)")
        }
    }
}

/// The Levenshtein distance between two short strings.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a.lowercased()), b = Array(b.lowercased())
    var row = Array(0...b.count)
    for i in 1...max(a.count, 1) where !a.isEmpty {
        var previous = row[0]
        row[0] = i
        for j in stride(from: 1, through: b.count, by: 1) {
            let saved = row[j]
            row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
            previous = saved
        }
    }
    return a.isEmpty ? b.count : row[b.count]
}

/// `handoff agent`: a node that hosts plugins and takes commands on a control socket.
struct AgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Run a node that hosts plugins (configured by a JSON file and flags).")

    @Option(help: "A JSON configuration file (keys: name, broker{frontend,backend}, plugins, data, control, continuation, advertisedHost, advertiseIntervalSeconds, streamStallTimeoutSeconds, streamChecksum, requireVerifiedStreamEnds, logLevel, logFormat, metrics, livePage, security{key,account,brokerKey}, insecure).")
    var config: String?
    @Option(help: "The node's name.") var name: String?
    @Option(parsing: .upToNextOption, help: ArgumentHelp("The broker's frontend and backend (or the configuration's broker, or $HANDOFF_BROKER); repeat for a pair of brokers.", valueName: "frontend backend"))
    var broker: [String] = []
    @Option(name: .customLong("plugins"), help: ArgumentHelp("A plugin folder (repeatable).", valueName: "dir")) var pluginFolders: [String] = []
    @Option(help: "The data folder (each plugin gets a folder inside).") var data: String?
    @Option(help: "The control endpoint `handoff contacts --agent` talks to (default ipc://DATA/control.sock).") var control: String?
    @Option(help: "Where this node answers continue requests.") var continuation: String?
    @Option(help: "The host name other nodes use to reach this one.") var advertisedHost: String?
    @Option(help: "Give up on a stream pair once its peer has sent nothing new, or taken nothing, for this many seconds although it stays connected (0, the default: wait as long as it does).")
    var streamStallTimeout: Double?
    @Option(help: "The checksum this node's stream writers end with: crc32c (the default), xxh64 or sha256 (readers verify whichever their writer announces).")
    var streamChecksum: StreamChecksum?
    @Flag(help: "Fail a stream whose end this node cannot verify (no checksum, or not in the algorithm its writer announced) with streamChecksumMismatch, rather than hold it to its length only.")
    var requireVerifiedStreamEnds = false
    @Flag(help: "Exit when the parent process exits (used by `handoff demo`).") var exitWithParent = false
    @OptionGroup var security: SecurityOptions
    @OptionGroup var metricsOptions: MetricsOptions
    @OptionGroup var logging: LoggingOptions

    /// The configuration file's `key`, one of `choices` in any case; `nil` when the file has none.
    static func choice<Value: RawRepresentable>(_ text: String?, key: String, of choices: [Value]) throws -> Value? where Value.RawValue == String {
        guard let text else { return nil }
        guard let value = Value(rawValue: text.lowercased()) else {
            throw ValidationError("\(key) \"\(text)\" in the configuration: expected one of \(choices.map(\.rawValue).joined(separator: ", "))")
        }
        return value
    }

    func run() async throws {
        if exitWithParent { exitWhenParentExits() }
        let file = try config.map(AgentFile.read) ?? AgentFile()
        let fileLevel = try Self.choice(file.logLevel, key: "logLevel", of: Logger.Level.allCases)
        let fileFormat = try Self.choice(file.logFormat, key: "logFormat", of: LogFormat.allCases)
        let stallSeconds = streamStallTimeout ?? file.streamStallTimeoutSeconds
        if let stallSeconds, !(stallSeconds >= 0 && stallSeconds.isFinite) {
            throw ValidationError("the stream stall timeout (--stream-stall-timeout, streamStallTimeoutSeconds) must be 0 (none) or a number of seconds, not \(stallSeconds)")
        }
        let checksum = try streamChecksum ?? Self.choice(file.streamChecksum, key: "streamChecksum", of: StreamChecksum.allCases)
        logging.bootstrap(configuredLevel: fileLevel, configuredFormat: fileFormat)
        let logger = Logger(label: "handoff.agent")

        let endpoints = try !broker.isEmpty ? broker : file.broker.map { [$0.frontend, $0.backend] } ?? Environment.brokerOrDefault()
        let bus = try Environment.bus(endpoints)
        let dataFolder = URL(fileURLWithPath: data ?? file.data ?? FileManager.default.currentDirectoryPath + "/handoff-data")
        try FileManager.default.createDirectory(at: dataFolder, withIntermediateDirectories: true)

        var configuration = Node.Configuration(
            name: name ?? file.name ?? ProcessInfo.processInfo.hostName,
            bus: bus)
        if let continuation = continuation ?? file.continuation { configuration.continuationEndpoint = continuation }
        configuration.advertisedHost = advertisedHost ?? file.advertisedHost
        if let seconds = file.advertiseIntervalSeconds { configuration.advertiseInterval = .milliseconds(Int(seconds * 1000)) }
        if let stallSeconds, stallSeconds > 0 { configuration.streamStallTimeout = .milliseconds(Int(stallSeconds * 1000)) }
        if let checksum { configuration.streamChecksum = checksum }
        configuration.requireVerifiedStreamEnds = requireVerifiedStreamEnds || file.requireVerifiedStreamEnds == true
        configuration.security = try security.resolve(fallback: file.security, needsBrokerKey: true)
        configuration.allowInsecure = security.allowsInsecure(fallback: file.insecure)

        let metricsAddress = metricsOptions.metrics ?? file.metrics
        let livePage = try metricsOptions.livePageAccess(fallback: Self.choice(file.livePage, key: "livePage", of: LivePageAccess.allCases))
        if let metricsAddress { _ = try MetricsOptions.parse(metricsAddress) }
        let registry = MetricsOptions.bootstrap(metricsAddress)
        let context = try Context()
        let node = try Node(configuration: configuration, context: context)
        var pluginOptions = PluginOptions()
        pluginOptions.folders = pluginFolders.isEmpty ? (file.plugins ?? []) : pluginFolders
        let plugins = loadPlugins(pluginOptions, logger: logger)
        let runtime = PluginRuntime(node: node, dataDirectory: dataFolder)
        for refusal in await runtime.start(plugins) { logger.warning("\(refusal)") }
        let controlEndpoint = control ?? file.control ?? "ipc://\(dataFolder.path)/control.sock"
        // The control socket takes commands without authentication: it stays on this machine.
        guard Security.isLocal(controlEndpoint) else {
            throw ValidationError("the control endpoint \(controlEndpoint) is beyond loopback; use ipc:// (the default) or tcp://127.0.0.1")
        }
        let server = try ControlServer(endpoint: controlEndpoint, context: context, node: node, runtime: runtime)
        logger.info("agent \(node.info.name) ready", metadata: [
            "control": "\(controlEndpoint)", "plugins": "\(runtime.plugins.map(\.name).joined(separator: ","))",
            "continuation": "\(node.continuationEndpoint)",
        ])
        let options = security, fileSecurity = file.security
        let hangup = reloadAccountOnHangup(logger: logger, hasAccount: configuration.security != nil) {
            let keys = try options.resolve(fallback: fileSecurity, needsBrokerKey: true)?.authorizedKeys ?? []
            try await node.updateAccount(keys)
            return keys.count
        }
        defer { hangup.cancel() }
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: node), .init(service: server)]
        let observer = registry == nil || livePage == .off ? nil : livePageObserver(configuration, node: node, context: context, logger: logger)
        if let registry, let address = metricsAddress {
            services.append(.init(service: try MetricsEndpoint.service(
                address: address, registry: registry, logger: logger, page: observer.map { ($0, livePage) }) {
                let health = await node.busHealth
                return HealthReport(healthy: health.isOnBus, reason: health.reason)
            }))
        }
        let group = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        // Type=notify units: ready once the node runs (its sockets bound, the bus joined).
        let readiness = Task {
            await node.untilRunning()
            Systemd.notify("READY=1\nSTATUS=on the bus as \(node.info.name), continuation \(node.continuationEndpoint)")
        }
        defer { readiness.cancel() }
        try await group.run()
        Systemd.notify("STOPPING=1")
        await runtime.shutdown()
        await server.close()
        await observer?.stop()
        // The node closed its sockets when it stopped: wait until its withdrawals have left.
        context.terminate()
    }
}

extension AgentCommand {
    /// The live page's view of the bus: a subscriber of its own at the (first) broker's backend,
    /// with the node's key; `nil` on a direct bus, which has no one place that hears everything.
    func livePageObserver(_ configuration: Node.Configuration, node: Node, context: Context, logger: Logger) -> BusObserver? {
        guard let backend = configuration.bus.brokerEndpoints?.first?.backend else {
            logger.notice("no live page: the node is on a direct bus (the page watches a broker's backend)")
            return nil
        }
        let curve = configuration.security.flatMap { security in security.brokerKey.map { (security.keyPair, $0) } }
        return BusObserver(
            BusObserver.Settings(endpoint: backend, curve: curve, source: "agent \(node.info.name) on \(backend)"),
            context: context, refusals: { await node.securityCounters.refusalsByReason })
    }
}

/// Answers `handoff` commands on the agent's control socket (REP), one at a time.
actor ControlServer: Service {
    let socket: Socket
    let node: Node
    let runtime: PluginRuntime

    init(endpoint: String, context: Context, node: Node, runtime: PluginRuntime) throws {
        if endpoint.hasPrefix("ipc://") { unlink(String(endpoint.dropFirst(6))) }
        socket = try context.socket(.rep)
        // A control request is a command and its arguments: a megabyte is far more than any needs.
        try socket.set(.maxMessageSize, 1 << 20)
        try socket.bind(endpoint)
        self.node = node
        self.runtime = runtime
    }

    func run() async throws {
        await cancelWhenGracefulShutdown { await self.serve() }
    }

    func close() {
        socket.close()
    }

    private func serve() async {
        while !Task.isCancelled {
            guard let request = try? await socket.receive() else { return }
            let reply = await handle(request.data)
            guard let bytes: [UInt8] = try? reply.serializedBytes() else { return }
            _ = try? await socket.send(bytes)
        }
    }

    private func handle(_ bytes: Data) async -> WireControlReply {
        var reply = WireControlReply()
        reply.protocolVersion = WireProtocol.version
        do {
            let request = try WireControlRequest(serializedBytes: bytes)
            guard request.protocolVersion == WireProtocol.version else {
                throw HandoffError(.unsupportedProtocolVersion, "control request of protocol version \(request.protocolVersion); this agent speaks \(WireProtocol.version)")
            }
            switch request.command {
            case .pluginCommand(let command):
                reply.lines = try await runtime.command(plugin: command.plugin, command.arguments)
            case .continueActivity(let command):
                reply.continued = try await continueActivity(id: command.activityID, type: command.activityType)
                let continued = reply.continued
                reply.lines = [continued.webpageURL.isEmpty
                    ? "continued \"\(continued.title)\" (\(continued.activityType)) from \(continued.originName) in \(String(format: "%.1f", continued.milliseconds)) ms"
                    : "no handler here: continue at \(continued.webpageURL)"]
            case .listActivities:
                for activity in await node.activities() {
                    reply.activities.append(.with {
                        $0.activityID = activity.id
                        $0.activityType = activity.activityType
                        $0.title = activity.title
                        $0.originName = activity.origin.name
                    })
                }
                for activity in await node.currentActivities {
                    reply.activities.append(.with {
                        $0.activityID = activity.id
                        $0.activityType = activity.activityType
                        $0.title = activity.title
                        $0.originName = node.info.name
                        $0.local = true
                    })
                }
                reply.lines = reply.activities.map { "\($0.activityID)\t\($0.activityType)\t\($0.title)\t\($0.local ? "(here)" : $0.originName)" }
            case .listPlugins:
                reply.plugins = runtime.plugins.map { plugin in
                    .with {
                        $0.name = plugin.name
                        $0.version = plugin.version
                        $0.activityTypes = plugin.activityTypes
                        $0.file = plugin.file
                        $0.teamID = plugin.teamID ?? ""
                        $0.abiVersion = "\(plugin.abiVersion.major).\(plugin.abiVersion.minor)"
                        $0.handlesStreams = plugin.handlesStreams
                    }
                }
                reply.lines = reply.plugins.map { "\($0.name)\t\($0.version)\t\($0.activityTypes.joined(separator: ","))\t\($0.file)" }
            case nil:
                throw HandoffError(.malformedMessage, "an empty control request")
            }
        } catch let error as HandoffError {
            reply.error = error.wireForControl
        } catch {
            var wire = WireError()
            wire.code = .handoffFailed
            wire.message = "\(error)"
            reply.error = wire
        }
        return reply
    }

    /// Continues by id, or the newest activity of a type (waiting up to 5 s for it to be known).
    private func continueActivity(id: String, type: String) async throws -> WireControlContinued {
        let started = ContinuousClock.now
        guard let activity = await node.activity(id: id, orNewestOf: type, within: .seconds(5)) else {
            throw HandoffError(.activityNotFound, id.isEmpty ? "no activity of type \(type) is on the bus" : "no activity with id \(id) is on the bus")
        }
        var outcome = WireControlContinued()
        outcome.activityID = activity.id
        outcome.activityType = activity.activityType
        outcome.title = activity.title
        outcome.originName = activity.origin.name
        switch try await node.continueActivity(activity) {
        case .restored(let continued):
            outcome.title = continued.title
            outcome.milliseconds = milliseconds(ContinuousClock.now - started)
        case .webpage(let url):
            outcome.webpageURL = url.absoluteString
        }
        return outcome
    }
}

extension HandoffError {
    /// The error as the control channel carries it.
    var wireForControl: WireError {
        var wire = WireError()
        // A local code (plugin failed, say) goes as HANDOFF_FAILED, as error.proto asks, with its
        // number in details["code"] for `handoff` to read back (HandoffError(controlReply:)); the
        // other details (a plugin's status, a limit) go along.
        wire.details = details
        switch WireErrorCode(rawValue: code.rawValue) {
        case .UNRECOGNIZED?, nil:
            wire.code = .handoffFailed
            wire.details["code"] = "\(code.rawValue)"
        case let declared?:
            wire.code = declared
        }
        wire.message = message
        if let activityType { wire.details["activity_type"] = activityType }
        return wire
    }
}

/// Sends this process SIGTERM (a graceful stop) once its parent has gone: `handoff demo` may be
/// killed outright, and its agents must not outlive it.
func exitWhenParentExits() {
    let parent = getppid()
    Thread.detachNewThread {
        while getppid() == parent { usleep(200_000) }
        kill(getpid(), SIGTERM)
    }
}

/// Writes a line to standard output at once (scripts wait for it).
func announce(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

// `--stream-checksum crc32c|xxh64|sha256`, by its raw values.
extension StreamChecksum: ExpressibleByArgument {}
