import ArgumentParser
import Foundation
import Handoff
import HandoffWire
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals
import ZeroMQ

/// `handoff activities`: what is current on the bus.
struct Activities: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the activities current on the bus.")
    @OptionGroup var bus: BusOptions
    @Option(help: "Only types with this prefix.") var type: String?
    @Option(help: "Only activities with this search keyword (repeatable: any of them).") var keyword: [String] = []
    @Option(help: "How long to wait for the bus's snapshot, in seconds (it comes at once from a running broker).") var wait: Double = 3
    @Flag(help: "One JSON object a line.") var json = false
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        logging.bootstrap()
        let configuration = try bus.configuration(name: "handoff-activities", subscriptions: [type ?? ""])
        let activities = try await Node.withRunning(configuration) { node in
            // The snapshot is the whole answer: what was current when the node joined.
            let synchronized = await node.untilSynchronized(timeout: .milliseconds(Int(wait * 1000)))
            if let refusal = await node.busRefusal { throw refusal }
            guard synchronized else {
                let reason = switch configuration.bus {
                case .broker, .brokers: "no broker answered at \((configuration.bus.brokerEndpoints ?? []).map(\.backend).joined(separator: " or ")) within \(wait) s: is it running, and reachable from here?"
                case .direct: "not every peer answered within \(wait) s: is each of them running, and reachable from here?"
                }
                throw HandoffError(.connectionUnavailable, reason)
            }
            return await node.activities(matching: ActivityFilter(keywords: keyword.isEmpty ? nil : Set(keyword)))
        }
        for activity in activities {
            if json {
                announce(jsonLine(["id": activity.id, "type": activity.activityType, "title": activity.title,
                                   "node": activity.origin.name, "nodeID": activity.origin.id, "version": activity.version,
                                   "streams": activity.supportsContinuationStreams]))
            } else {
                announce("\(activity.id)  \(activity.activityType)  \"\(activity.title)\"  from \(activity.origin.name)  v\(activity.version)")
            }
        }
        if activities.isEmpty && !json { announce("no activities on the bus") }
    }
}

/// `handoff nodes`: the nodes on the bus, as their presence describes them.
struct Nodes: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the nodes on the bus (by their presence).")
    @OptionGroup var bus: BusOptions
    @Option(help: "How long to listen, in seconds: a node says it is there once every advertise interval (2 s by default).")
    var wait: Double = 2.5
    @Flag(help: "One JSON object a line.") var json = false
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        logging.bootstrap()
        // Presence only: no activity prefix to follow.
        let configuration = try bus.configuration(name: "handoff-nodes", subscriptions: [])
        let nodes = try await Node.withRunning(configuration) { node in
            try await Task.sleep(for: .milliseconds(Int(wait * 1000)))
            if let refusal = await node.busRefusal { throw refusal }
            return await node.nodes()
        }
        for node in nodes {
            let ago = max(0, Date().timeIntervalSince(node.lastHeard))
            if json {
                announce(jsonLine(["id": node.info.id, "name": node.info.name, "host": node.info.host,
                                   "activities": node.activityCount, "partial": node.listIsPartial,
                                   "continuation": node.continueEndpoint, "lastHeardSecondsAgo": (ago * 10).rounded() / 10,
                                   "key": node.info.publicKey?.z85 ?? ""]))
            } else {
                let count = "\(node.activityCount)\(node.listIsPartial ? "+" : "") activit\(node.activityCount == 1 ? "y" : "ies")"
                announce("\(node.info.name)  on \(node.info.host)  \(count)  heard \(String(format: "%.1f", ago)) s ago  \(node.info.id)  \(node.continueEndpoint)")
            }
        }
        if nodes.isEmpty && !json { announce("no nodes heard on the bus within \(wait) s") }
    }
}

/// `handoff continue`: continue an activity here, by id or type, with the plugins of this machine.
struct Continue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Continue an activity (by id or type) with the plugins here, or through an agent (--agent).")
    @Option(help: "The activity's id.") var id: String?
    @Option(help: "The newest activity of this type.") var type: String?
    @Option(help: "Ask this agent's control endpoint to continue it, instead of doing it here.") var agent: String?
    @OptionGroup var bus: BusOptions
    @OptionGroup var plugins: PluginOptions
    @Option(help: "The data folder for the plugins.") var data = FileManager.default.currentDirectoryPath + "/handoff-data"
    @Option(help: "How long to wait for the activity to be known, in seconds.") var wait: Double = 2
    @Option(help: "Continue without a plugin: open the activity's continuation streams and save what arrives to this file.")
    var save: String?
    @Option(help: "Continue a document activity without a plugin: open its document from shared storage (--shared-folder), or pull a copy into this folder; a copy changed here is never overwritten.")
    var documentInto: String?
    @Option(help: ArgumentHelp("A folder this machine shares with the originator (repeatable): documents under it are opened in place.", valueName: "dir"))
    var sharedFolder: [String] = []
    @Flag(help: "Print the outcome as one JSON object (activityId, activityType, title, origin, milliseconds; webpageURL when there is no handler; saved and bytes with --save).")
    var json = false
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard (id == nil) != (type == nil) else { throw ValidationError("give exactly one of --id and --type") }
        guard save == nil || agent == nil else { throw ValidationError("--save works here, not through --agent") }
        guard documentInto == nil || (agent == nil && save == nil) else { throw ValidationError("--document-into works here, and not with --save") }
    }

    func run() async throws {
        logging.bootstrap()
        if let agent {
            var command = WireContinueCommand()
            command.activityID = id ?? ""
            command.activityType = type ?? ""
            let reply = try await askAgent(agent, .continueActivity(command))
            if json {
                let continued = reply.continued
                var object: [String: Any] = [
                    "activityId": continued.activityID, "activityType": continued.activityType,
                    "title": continued.title, "origin": continued.originName,
                ]
                if continued.webpageURL.isEmpty { object["milliseconds"] = continued.milliseconds } else { object["webpageURL"] = continued.webpageURL }
                announce(jsonLine(object))
            } else {
                for line in reply.lines { announce(line) }
            }
            return
        }
        let logger = Logger(label: "handoff.continue")
        var configuration = try bus.configuration(name: "handoff-continue")
        configuration.sharedFolders = sharedFolder
        let opened = OpenedDocumentBox()
        // The line to print, and the same as a JSON object.
        let (message, object): (String, String) = try await Node.withRunning(configuration) { node in
            let runtime = PluginRuntime(node: node, dataDirectory: URL(fileURLWithPath: data))
            await runtime.start(loadPlugins(plugins, logger: logger))
            let deadline = ContinuousClock.now + .milliseconds(Int(wait * 1000))
            var found: DiscoveredActivity?
            while found == nil && ContinuousClock.now < deadline {
                found = if let id { await node.activities().first { $0.id == id } } else { await node.newestActivity(ofType: type!) }
                if found == nil { try await Task.sleep(for: .milliseconds(20)) }
            }
            guard let found else {
                throw HandoffError(.activityNotFound, id.map { "no activity with id \($0) is on the bus (run `handoff activities` to see what is)" }
                    ?? "no activity of type \(type!) is on the bus")
            }
            if let documentInto {
                await node.setContinuationHandler(forType: found.activityType, teamID: found.teamID ?? "") { activity in
                    let document = try await node.openDocument(of: activity, into: URL(fileURLWithPath: documentInto))
                    opened.value.withLock { $0 = document }
                }
            }
            if let save {
                // Saving the raw streams is the user's explicit choice, whatever the activity's team.
                await node.setContinuationHandler(forType: found.activityType, teamID: found.teamID ?? "") { activity in
                    try await saveStreams(of: activity, on: node, to: save)
                }
            }
            let started = ContinuousClock.now
            let progress = Task { if !json { await showProgress(of: node) } }
            defer { progress.cancel() }
            do {
                let result = try await node.continueActivity(found)
                progress.cancel()
                await progress.value
                var object: [String: Any] = [
                    "activityId": found.id, "activityType": found.activityType, "title": found.title, "origin": found.origin.name,
                ]
                switch result {
                case .restored(let continued):
                    let took = milliseconds(ContinuousClock.now - started)
                    object["title"] = continued.title
                    object["milliseconds"] = took
                    if let save {
                        object["saved"] = save
                        object["bytes"] = (try? FileManager.default.attributesOfItem(atPath: save)[.size] as? Int) ?? 0
                    }
                    var text = "continued \"\(continued.title)\" (\(continued.activityType)) from \(continued.origin.name) in \(String(format: "%.1f", took)) ms"
                    if let document = opened.value.withLock({ $0 }) {
                        let source = switch document.source {
                        case .sharedStorage: "sharedStorage"
                        case .localCopy: "localCopy"
                        case .stream: "stream"
                        }
                        object["document"] = ["path": document.url.path, "source": source, "version": document.version]
                        text += "; document \(document.url.path) (version \(document.version), \(source == "stream" ? "pulled over a stream" : source == "localCopy" ? "the copy here" : "opened in place on shared storage"))"
                    }
                    return (text, jsonLine(object))
                case .webpage(let url):
                    object["webpageURL"] = url.absoluteString
                    return ("no handler here for \(found.activityType): continue at \(url)", jsonLine(object))
                }
            } catch {
                let underlying = error as? HandoffError
                throw HandoffError(
                    underlying?.code ?? .handoffFailed, "could not continue \"\(found.title)\": \(underlying?.message ?? "\(error)")",
                    activityType: found.activityType, cause: error)
            }
        }
        announce(json ? object : message)
    }
}

/// What `continue --document-into` opened, from the continuation handler to the printed line.
final class OpenedDocumentBox: Sendable {
    let value = Mutex<OpenedDocument?>(nil)
}

/// Opens a continued activity's streams, writes what arrives to `path`, and sends nothing back.
func saveStreams(of activity: ContinuedActivity, on node: Node, to path: String) async throws {
    // One way: this side only reads, so there is nothing to finish on the output.
    let streams = try await node.openStreams(for: activity, direction: .fromOriginator)
    guard FileManager.default.createFile(atPath: path, contents: nil), let file = FileHandle(forWritingAtPath: path) else {
        await streams.cancel(reason: "cannot write \(path)")
        throw HandoffError(.invalidConfiguration, "cannot write \(path)")
    }
    defer { try? file.close() }
    do {
        for try await chunk in streams.input { try file.write(contentsOf: chunk) }
    } catch {
        try? FileManager.default.removeItem(atPath: path)  // never leave a partial file looking complete
        throw error
    }
}

/// Draws a progress bar on standard error for the stream the node receives, redrawn at most every
/// 100 ms, and its final state when cancelled (the continuation is over). While the pair waits (the
/// connection to the originator dropped, the open is unanswered, no bytes for a while) the line
/// says for what, and for how long at most; off a terminal, that line is printed once a second.
func showProgress(of node: Node) async {
    let terminal = isatty(STDERR_FILENO) == 1
    var input: ContinuationInputStream?
    var lastDrawn = ContinuousClock.now - .seconds(1)
    var lastWaitPrinted = ContinuousClock.now - .seconds(1)
    var width = 0
    func draw(waiting: StreamWait? = nil) {
        if let waiting, !terminal {
            guard ContinuousClock.now - lastWaitPrinted >= .seconds(1) else { return }
            lastWaitPrinted = .now
            FileHandle.standardError.write(Data((waiting.description + "\n").utf8))
            return
        }
        guard let progress = input?.progress else { return }
        let mib = Double(progress.bytes) / 1_048_576
        var line: String
        if let fraction = progress.fractionCompleted, let total = progress.total {
            let filled = Int(fraction * 30)
            line = "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: 30 - filled) + "]"
            line += String(format: " %3.0f%%  %.1f of %.1f MiB", fraction * 100, mib, Double(total) / 1_048_576)
        } else {
            line = String(format: "%.1f MiB received", mib)
        }
        if let waiting { line += "  (\(waiting))" }
        // Pad over what a longer line drew before (the waiting note comes and goes).
        let padding = String(repeating: " ", count: max(0, width - line.count))
        width = line.count
        FileHandle.standardError.write(Data((terminal ? "\r" + line + padding : line + "\n").utf8))
        lastDrawn = .now
    }
    while !Task.isCancelled {
        try? await Task.sleep(for: .milliseconds(10))
        if input == nil { input = await node.openStreams.first?.input }
        guard input != nil, ContinuousClock.now - lastDrawn >= .milliseconds(100) else { continue }
        draw(waiting: await node.streamWaits().first)
    }
    if input != nil {
        draw()
        if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}

/// `handoff advertise`: make an activity current until interrupted.
struct Advertise: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Make an activity current on the bus until interrupted.")
    @Option(help: "The reverse-DNS activity type.") var type: String
    @Option(help: "The title.") var title = ""
    @Option(help: "userInfo as a JSON object (strings, numbers, booleans, arrays, objects).") var userInfo: String?
    @Option(help: "A webpage URL to fall back to.") var webpage: String?
    @Option(help: "Stop after this many seconds (default: until SIGINT/SIGTERM).") var seconds: Double?
    @Option(help: "A document the activity is about: continuing nodes open it from shared storage, or pull it over a stream.") var document: String?
    @Option(help: "The document's version (higher is newer).") var documentVersion: UInt64 = 1
    @Flag(help: "Say that it advertises as one JSON object (activityId, activityType, node).") var json = false
    @OptionGroup var bus: BusOptions
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        logging.bootstrap()
        let activity = try UserActivity(activityType: type)
        activity.title = title
        if let userInfo {
            guard let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(userInfo.utf8)) else {
                throw ValidationError("--user-info must be a JSON object")
            }
            activity.userInfo = object.mapValues(\.userInfoValue)
        }
        activity.webpageURL = webpage.flatMap(URL.init(string:))
        if let document {
            activity.document = try DocumentReference.file(at: URL(fileURLWithPath: document).standardizedFileURL, version: documentVersion)
        }
        let logger = Logger(label: "handoff.advertise")
        let context = try Context()
        let node = try Node(configuration: try bus.configuration(name: "handoff-advertise"), context: context)
        defer { context.terminate() }  // after the node stopped: wait until its withdrawal has left
        try await activity.becomeCurrent(on: node)
        let group = ServiceGroup(services: [node], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        // Whichever comes first ends it: SIGTERM/SIGINT (which ends the run at once), or the time.
        try await withThrowingTaskGroup(of: Bool.self) { tasks in
            tasks.addTask { try await group.run(); return true }
            // Said once the node runs, so the group's signal handlers are in place: a SIGTERM sent
            // on seeing this line withdraws the activity instead of killing the process.
            await node.untilRunning()
            announce(json
                ? jsonLine(["event": "advertising", "activityId": activity.id, "activityType": type, "node": node.info.name])
                : "advertising \(activity.id) (\(type)) from \(node.info.name); Ctrl-C to withdraw")
            if let seconds {
                tasks.addTask { try? await Task.sleep(for: .milliseconds(Int(seconds * 1000))); return false }
            }
            if try await tasks.next() == true {
                tasks.cancelAll()  // the run ended (a signal; the activity is withdrawn): stop the timer
            } else {
                await group.triggerGracefulShutdown()
                _ = try await tasks.next()
            }
        }
    }
}

/// A JSON value, decoded exactly (booleans stay booleans, integers stay integers).
enum JSONValue: Decodable {
    case bool(Bool), int(Int64), double(Double), string(String), list([JSONValue]), map([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Int64.self) { self = .int(value) }
        else if let value = try? container.decode(Double.self) { self = .double(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([JSONValue].self) { self = .list(value) }
        else { self = .map(try container.decode([String: JSONValue].self)) }
    }

    var userInfoValue: UserInfoValue {
        switch self {
        case .bool(let value): .bool(value)
        case .int(let value): .int(value)
        case .double(let value): .double(value)
        case .string(let value): .string(value)
        case .list(let values): .list(values.map(\.userInfoValue))
        case .map(let entries): .map(entries.mapValues(\.userInfoValue))
        }
    }
}

/// One JSON object on a line, keys sorted.
func jsonLine(_ object: [String: Any]) -> String {
    let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
    return String(decoding: data, as: UTF8.self)
}

/// `handoff contacts`: the Contacts plugin's commands, run by an agent.
struct Contacts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage an agent's contacts: add FIRST LAST PHONE EMAIL | list | rm ID | edit ID | view ID | share | draft | viewing (the same as `handoff plugin contacts ...`).")
    @Option(help: "The agent's control endpoint.") var agent: String
    @Flag(help: "Print one JSON object: plugin, and the output's lines.") var json = false
    @Argument(help: "The contacts command and its arguments.") var arguments: [String]

    func run() async throws {
        try await runPluginCommand("contacts", arguments, on: agent, json: json)
    }
}

/// `handoff plugin NAME ARGS...`: any plugin's commands, run by the agent that hosts it.
struct PluginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plugin",
        abstract: "Run a plugin's command on the agent that hosts it: handoff plugin NAME COMMAND [ARGS...] --agent EP.",
        discussion: "What each plugin's commands are is in its README (the ABI: docs/plugin-abi.md, \"Commands\"); `handoff plugins list --agent EP` lists the plugins an agent hosts.")
    @Option(help: "The agent's control endpoint.") var agent: String
    @Flag(help: "Print one JSON object: plugin, and the output's lines (their format is the plugin's).") var json = false
    @Argument(help: "The plugin's name (as `handoff plugins list` shows it).") var name: String
    @Argument(help: "The plugin's command and its arguments (after `--` when one starts with a dash).") var arguments: [String] = []

    func validate() throws {
        guard !arguments.isEmpty else { throw ValidationError("name the plugin's command: handoff plugin \(name) COMMAND [ARGS...] --agent EP") }
    }

    func run() async throws {
        try await runPluginCommand(name, arguments, on: agent, json: json)
    }
}

/// Asks the agent at `agent` to run a plugin's command, and prints its output lines (or, with
/// `json`, one object holding them).
func runPluginCommand(_ plugin: String, _ arguments: [String], on agent: String, json: Bool) async throws {
    var command = WirePluginCommand()
    command.plugin = plugin
    command.arguments = arguments
    let lines = try await askAgent(agent, .pluginCommand(command)).lines
    if json {
        announce(jsonLine(["plugin": plugin, "lines": lines]))
    } else {
        for line in lines { announce(line) }
    }
}

/// `handoff plugins list`: what plugins a folder holds, and what they handle.
struct PluginsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plugins",
        abstract: "List plugins (`plugins list`, of folders or of an agent), or write a new one (`plugins new NAME --lang c|swift`).",
        subcommands: [List.self, New.self])

    /// `handoff plugins new`: a plugin skeleton that builds with one command against the SDK.
    struct New: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a new plugin (C or Swift) that builds with one command against the installed plugin SDK.",
            discussion: """
                Install the SDK first (Handoff's scripts/install-sdk [--prefix DIR]). A C plugin builds with `make` \
                (gcc, protobuf-c); a Swift plugin with `swift build -c release`, using the toolchain the agent was \
                built with. Copy the .so into an agent's plugin folder; `handoff plugin NAME hello --agent EP` answers. \
                docs/plugin-abi.md, "Your first plugin in 10 minutes", walks through it.
                """)

        enum Language: String, ExpressibleByArgument, CaseIterable { case c, swift }

        @Argument(help: "The plugin's name: lowercase letters, digits and dashes (its folder, library and command name).")
        var name: String
        @Option(help: "c or swift.") var lang: Language = .c
        @Option(help: "The activity type it handles (default: com.example.NAME.open).") var type: String?
        @Option(help: "The folder to write the plugin's folder into.") var out = "."
        @Option(help: "The SDK's prefix, as given to scripts/install-sdk (default: where pkg-config finds handoff-plugin).") var sdk: String?
        @Flag(help: "Write into an existing folder, replacing the skeleton's files.") var force = false
        @Flag(help: "Print one JSON object: folder, files, build (the command that builds it).") var json = false

        func validate() throws {
            guard let first = name.first, first.isLowercase, name.allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "-" }), name.count <= 40 else {
                throw ValidationError("the name must start with a lowercase letter and hold only lowercase letters, digits and dashes (at most 40): \(name)")
            }
            do { try UserActivity.validate(activityType: activityType) } catch { throw ValidationError(error.message) }
        }

        var activityType: String { type ?? "com.example.\(name).open" }

        func run() throws {
            let folder = URL(fileURLWithPath: out).appendingPathComponent(name)
            if FileManager.default.fileExists(atPath: folder.path) && !force {
                throw HandoffError(.invalidConfiguration, "\(folder.path) exists: pick another name or --out, or pass --force")
            }
            let files: [String: String]
            let build: String
            switch lang {
            case .c:
                files = PluginTemplates.c(name: name, activityType: activityType)
                build = "make"
            case .swift:
                let kit = try sdk.map { URL(fileURLWithPath: $0).appendingPathComponent("share/handoff/swift").path } ?? Self.pkgConfig("swiftkit")
                guard FileManager.default.fileExists(atPath: kit + "/Package.swift") else {
                    throw HandoffError(.invalidConfiguration, "no HandoffPluginKit at \(kit): install the SDK (scripts/install-sdk) or name it with --sdk PREFIX")
                }
                files = PluginTemplates.swift(name: name, activityType: activityType, kit: kit)
                build = "swift build -c release"
            }
            for (path, text) in files {
                let file = folder.appendingPathComponent(path)
                try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
                try text.write(to: file, atomically: true, encoding: .utf8)
            }
            if json {
                print(jsonLine(["folder": folder.path, "files": files.keys.sorted(), "build": build, "activityType": activityType]))
                return
            }
            print("wrote a \(lang.rawValue) plugin in \(folder.path): \(files.keys.sorted().joined(separator: ", "))")
            print("build it:   cd \(folder.path) && \(build)")
            print("load it:    copy libhandoff-\(name).so into an agent's plugin folder (--plugins DIR) and start the agent")
            print("try it:     handoff plugin \(name) hello --agent EP; handoff plugin \(name) open \"A title\" --agent EP")
        }

        /// A variable of the installed SDK's pkg-config file.
        static func pkgConfig(_ variable: String) throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["pkg-config", "--variable=\(variable)", "handoff-plugin"]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            let value = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard process.terminationStatus == 0, !value.isEmpty else {
                throw HandoffError(.invalidConfiguration, "pkg-config does not know handoff-plugin: install the SDK (scripts/install-sdk), set PKG_CONFIG_PATH, or pass --sdk PREFIX")
            }
            return value
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the plugins of folders, or of a running agent.")
        @OptionGroup var plugins: PluginOptions
        @Option(help: "List the plugins a running agent hosts.") var agent: String?
        @Flag(help: "One JSON object a line: name, version, activityTypes, file, teamId, abiVersion, handlesStreams; {\"refused\": …} for a plugin or folder refused.")
        var json = false

        func run() async throws {
            if let agent {
                let reply = try await askAgent(agent, .listPlugins(WireListPlugins()))
                if json {
                    for plugin in reply.plugins {
                        announce(Self.json(name: plugin.name, version: plugin.version, types: plugin.activityTypes, file: plugin.file,
                                           team: plugin.teamID, abi: plugin.abiVersion, streams: plugin.handlesStreams))
                    }
                } else {
                    for line in reply.lines { announce(line) }
                }
                return
            }
            let (loaded, errors) = PluginLoader.loadAll(from: plugins.resolved) { folder, name in
                name.hasSuffix(".so") && (folder != executableFolder || isPluginLibrary(name))
            }
            if json {
                for plugin in loaded {
                    announce(Self.json(name: plugin.name, version: plugin.version, types: plugin.activityTypes, file: plugin.file,
                                       team: plugin.teamID ?? "", abi: "\(plugin.abiVersion.major).\(plugin.abiVersion.minor)", streams: plugin.handlesStreams))
                }
                for error in errors { announce(jsonLine(["refused": error.details["reason"] ?? error.message, "file": error.details["file"] ?? ""])) }
                if !errors.isEmpty { throw ExitCode(1) }
                return
            }
            for plugin in loaded {
                announce("\(plugin.name) \(plugin.version)  team \(plugin.teamID ?? "-")  ABI \(plugin.abiVersion.major).\(plugin.abiVersion.minor)  streams \(plugin.handlesStreams ? "yes" : "no")")
                announce("    types: \(plugin.activityTypes.joined(separator: ", "))")
                announce("    file:  \(plugin.file)")
            }
            for error in errors { announce("refused: \(error.message)") }
            if loaded.isEmpty && errors.isEmpty { announce("no plugins in \(plugins.resolved.joined(separator: ", "))") }
            // A refused plugin or an unreadable folder is a failure to report, not a listing.
            if !errors.isEmpty { throw ExitCode(1) }
        }

        /// One plugin as a JSON line, the same from a folder or an agent.
        static func json(name: String, version: String, types: [String], file: String, team: String, abi: String, streams: Bool) -> String {
            jsonLine(["name": name, "version": version, "activityTypes": types, "file": file,
                      "teamId": team.isEmpty ? NSNull() : team, "abiVersion": abi, "handlesStreams": streams])
        }
    }
}
