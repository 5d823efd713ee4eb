import ArgumentParser
import Foundation
import Handoff
import HandoffWire
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals
import ZeroMQ

/// `handoff plugin NAME ARGS...`: any plugin's commands, run by the agent that hosts it.
struct PluginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plugin",
        abstract: "Run a plugin's command on the agent that hosts it: handoff plugin NAME COMMAND [ARGS...] --agent EP.",
        discussion: """
            What each plugin's commands are is in its README (the ABI: docs/plugin-abi.md, "Commands"); `handoff plugins list --agent EP` lists the plugins an agent hosts. \
            An argument `-` stands for this command's standard input: the agent is given the path of a private temporary file holding it \
            (so the agent must run on this host), removed once the command returns.
            """)
    @Option(help: "The agent's control endpoint.") var agent: String
    @Flag(help: "Print one JSON object: plugin, and the output's lines (their format is the plugin's).") var json = false
    @Argument(help: "The plugin's name (as `handoff plugins list` shows it).") var name: String
    @Argument(help: "The plugin's command and its arguments (after `--` when one starts with a dash).") var arguments: [String] = []

    func validate() throws {
        guard !arguments.isEmpty else { throw ValidationError("name the plugin's command: handoff plugin \(name) COMMAND [ARGS...] --agent EP") }
    }

    func run() async throws {
        guard arguments.contains("-") else {
            try await runPluginCommand(name, arguments, on: agent, json: json)
            return
        }
        let input = try StandardInputFile()
        defer { input.remove() }
        try await runPluginCommand(name, arguments.map { $0 == "-" ? input.path : $0 }, on: agent, json: json)
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
        announce(jsonLine(PluginOutput(plugin: plugin, lines: lines)))
    } else {
        for line in lines { announce(line) }
    }
}

/// Standard input, copied to a file only this user can read, in a folder of its own (for a
/// plugin command's `-`, as `handoff plugin clipboard copy -` takes a pipe).
struct StandardInputFile {
    let folder: URL
    var path: String { folder.appendingPathComponent("stdin").path }

    init() throws {
        var template = Array((FileManager.default.temporaryDirectory.path + "/handoff-stdin-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw ValidationError("cannot make a temporary folder for standard input: \(String(cString: strerror(errno)))") }
        folder = URL(fileURLWithPath: String(cString: made))
        let descriptor = open(folder.appendingPathComponent("stdin").path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else { throw ValidationError("cannot keep standard input: \(String(cString: strerror(errno)))") }
        let file = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        while let chunk = try FileHandle.standardInput.read(upToCount: 1 << 20), !chunk.isEmpty {
            try file.write(contentsOf: chunk)
        }
        try file.close()
    }

    func remove() {
        try? FileManager.default.removeItem(at: folder)
    }
}

/// `plugin … --json`: what the plugin's command printed.
private struct PluginOutput: Encodable {
    let plugin: String
    let lines: [String]
}
