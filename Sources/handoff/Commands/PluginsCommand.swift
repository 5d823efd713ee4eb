import ArgumentParser
import Foundation
import Handoff
import HandoffWire
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals
import ZeroMQ

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
                print(jsonLine(NewPluginLine(folder: folder.path, files: files.keys.sorted(), build: build, activityType: activityType)))
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
                for error in errors { announce(jsonLine(RefusedPluginLine(refused: error.details["reason"] ?? error.message, file: error.details["file"] ?? ""))) }
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
            jsonLine(PluginLine(name: name, version: version, activityTypes: types, file: file,
                                teamId: team.isEmpty ? nil : team, abiVersion: abi, handlesStreams: streams))
        }
    }
}

/// `plugins new --json`: the skeleton written.
private struct NewPluginLine: Encodable {
    let folder: String
    let files: [String]
    let build: String
    let activityType: String
}

/// `plugins list --json`: a plugin or folder refused.
private struct RefusedPluginLine: Encodable {
    let refused: String
    let file: String
}

/// `plugins list --json`: one plugin, the same from a folder or an agent.
private struct PluginLine: Encodable {
    let name: String
    let version: String
    let activityTypes: [String]
    let file: String
    /// `null` without a team, as before: a consumer tells "no team" from "field missing".
    let teamId: String?
    let abiVersion: String
    let handlesStreams: Bool

    enum CodingKeys: String, CodingKey { case name, version, activityTypes, file, teamId, abiVersion, handlesStreams }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(version, forKey: .version)
        try container.encode(activityTypes, forKey: .activityTypes)
        try container.encode(file, forKey: .file)
        try container.encode(teamId, forKey: .teamId)  // null when nil
        try container.encode(abiVersion, forKey: .abiVersion)
        try container.encode(handlesStreams, forKey: .handlesStreams)
    }
}
