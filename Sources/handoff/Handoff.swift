import ArgumentParser
import Foundation
import HandoffExecutor
import Handoff
import Logging
import Synchronization
import ZeroMQ

/// The `handoff` command.
@main
struct HandoffCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "handoff",
        abstract: "Hand activities off between processes and hosts over ZeroMQ.",
        discussion: "Start with `handoff demo`: a broker and two agents on loopback play the contacts story.",
        version: HandoffVersion.description,
        subcommands: [
            DemoCommand.self, BrokerCommand.self, AgentCommand.self, MonitorCommand.self, TopCommand.self, TraceCommand.self, ActivitiesCommand.self, NodesCommand.self, ContinueCommand.self,
            AdvertiseCommand.self, PluginCommand.self, ContactsCommand.self, PluginsCommand.self, KeygenCommand.self, HealthCommand.self,
        ]
    )

    /// ArgumentParser's own main, except that with `--log-format json` a command's error is logged
    /// as one more JSON line (log shippers parse every line) before the same exit status.
    static func main() async {
        // Before any thread allocates: a stream's chunks reuse their pages (AllocatorTuning).
        AllocatorTuning.keepStreamBuffers()
        // Still the only thread: a broker's work is one thread, so its allocations one arena's
        // (AllocatorTuning.oneArena). Parsed again where the command runs, which reports errors.
        if (try? parseAsRoot()) is BrokerCommand { AllocatorTuning.oneArena() }
        // Asked by whoever supervises this process (a test, a script): end with it.
        ParentWatch.exitWithParentIfAsked()
        // Every task of the command, and the child tasks it starts, on the loops that wait for the
        // sockets (EventLoops): public task executor preference, inherited by child tasks.
        await withTaskExecutorPreference(EventLoops.shared) {
            do {
                var command = try parseAsRoot()
                if var asyncCommand = command as? any AsyncParsableCommand {
                    try await asyncCommand.run()
                } else {
                    try command.run()
                }
            } catch {
                let status = exitCode(for: error)
                if JSONLogHandler.isActive.load(ordering: .relaxed), status != .success {
                    // Every error of the command is a HandoffError: its code and details as fields.
                    var metadata: Logger.Metadata = [:]
                    if let error = error as? HandoffError {
                        metadata["code"] = "\(error.code)"
                        metadata["code_value"] = "\(error.code.rawValue)"
                        for (key, value) in error.details { metadata[key] = "\(value)" }
                        if let cause = error.cause { metadata["cause"] = "\(cause)" }
                    }
                    Logger(label: "handoff").error("\(fullMessage(for: error))", metadata: metadata)
                    Foundation.exit(status.rawValue)
                }
                exit(withError: error)
            }
        }
    }
}

/// Where the broker is, for commands that join the bus.
struct BusOptions: ParsableArguments {
    @Option(name: .customLong("broker"), parsing: .upToNextOption,
            help: ArgumentHelp("The broker's frontend and backend endpoints (or $HANDOFF_BROKER); repeat for a pair of brokers. Default: tcp://127.0.0.1:5555 tcp://127.0.0.1:5556.", valueName: "frontend backend"))
    var broker: [String] = []
    @OptionGroup var security: SecurityOptions

    func validate() throws {
        if !broker.isEmpty { _ = try Environment.bus(broker) }
        _ = try Environment.broker()
    }

    /// --broker, else $HANDOFF_BROKER, else loopback (``validate()`` has refused a malformed $HANDOFF_BROKER).
    var endpoints: [String] { broker.isEmpty ? (try? Environment.brokerOrDefault()) ?? Environment.defaultBroker : broker }

    var bus: Node.Configuration.Bus { (try? Environment.bus(endpoints)) ?? .broker(frontend: endpoints[0], backend: endpoints[1]) }
}

/// Plugin folders, for commands that host plugins.
struct PluginOptions: ParsableArguments {
    @Option(name: .customLong("plugins"), help: ArgumentHelp("A plugin folder (repeatable). Default: /usr/lib/handoff/plugins and /usr/local/lib/handoff/plugins where they exist, and the folder of this executable; then HANDOFF_PLUGIN_PATH.", valueName: "dir"))
    var folders: [String] = []

    /// Where an installed Handoff keeps its plugins (deploy/ installs there).
    static let installFolders = ["/usr/lib/handoff/plugins", "/usr/local/lib/handoff/plugins"]

    /// The folders to scan: the given ones, or else the install folders that exist and the
    /// executable's own folder (a build folder); then HANDOFF_PLUGIN_PATH.
    var resolved: [String] {
        let defaults = Self.installFolders.filter { FileManager.default.fileExists(atPath: $0) } + [executableFolder]
        return PluginLoader.folders(configured: folders.isEmpty ? defaults : folders)
    }
}

/// The folder of the running executable (where SwiftPM puts the plugin libraries beside it).
var executableFolder: String {
    URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().path
}

/// Only the plugin libraries of a folder: SwiftPM's build folder holds other shared objects too.
func isPluginLibrary(_ name: String) -> Bool {
    name.hasSuffix(".so") && (name.hasPrefix("libHandoff") && name.hasSuffix("Plugin.so") || name.hasPrefix("libhandoff-"))
}

/// Loads plugins; in the executable's own folder (SwiftPM's build folder) only the plugin libraries.
func loadPlugins(_ options: PluginOptions, logger: Logger) -> [LoadedPlugin] {
    let (plugins, errors) = PluginLoader.loadAll(from: options.resolved) { folder, name in
        name.hasSuffix(".so") && (folder != executableFolder || isPluginLibrary(name))
    }
    for error in errors { logger.warning("\(error)") }
    return plugins
}

/// Milliseconds in a duration, for printing.
func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}


