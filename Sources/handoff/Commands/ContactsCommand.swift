import ArgumentParser
import Foundation
import Handoff
import HandoffWire
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals
import ZeroMQ

/// `handoff contacts`: the Contacts plugin's commands, run by an agent.
struct ContactsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "contacts",
        abstract: "Manage an agent's contacts: add FIRST LAST PHONE EMAIL | list | rm ID | edit ID | view ID | share | draft | viewing (the same as `handoff plugin contacts ...`).")
    @Option(help: "The agent's control endpoint.") var agent: String
    @Flag(help: "Print one JSON object: plugin, and the output's lines.") var json = false
    @Argument(help: "The contacts command and its arguments.") var arguments: [String]

    func run() async throws {
        try await runPluginCommand("contacts", arguments, on: agent, json: json)
    }
}
