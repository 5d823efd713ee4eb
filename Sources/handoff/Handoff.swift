import ArgumentParser

/// The `handoff` command.
@main
struct HandoffCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "handoff",
        abstract: "Hand activities off between processes and hosts over ZeroMQ.",
        subcommands: [Smoke.self]
    )
}
