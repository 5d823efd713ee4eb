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
        announce(jsonLine(PluginOutput(plugin: plugin, lines: lines)))
    } else {
        for line in lines { announce(line) }
    }
}

/// `plugin … --json`: what the plugin's command printed.
private struct PluginOutput: Encodable {
    let plugin: String
    let lines: [String]
}
