import Foundation
import Glibc
import Testing
import HandoffTestSupport

/// Each line of `output` as a JSON object; a line that is not one fails the test.
private func objects(_ output: String, _ what: String) -> [[String: Any]] {
    output.split(separator: "\n").compactMap { line in
        let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        #expect(object != nil, "\(what): not a JSON object: \(line)")
        return object
    }
}

@Suite("--json on every command that prints data", .exclusive, .serialized)
struct JSONOutputTests {
    /// The subcommands that print data (each must take --json), and those that do not.
    static let printsData = ["monitor", "top", "trace", "activities", "nodes", "continue", "advertise", "plugin", "contacts", "plugins list", "plugins new", "keygen", "health"]
    static let printsNoData = ["demo": "a story for people", "broker": "a server (its logs: --log-format json)", "agent": "a server (its logs: --log-format json)"]

    @Test("every subcommand is either a data command with --json or one that prints no data")
    func everyCommandClassified() async throws {
        let help = try await runHandoff(["--help"]).output
        // The block after SUBCOMMANDS:, up to its blank line; a name starts each entry.
        let block = help.components(separatedBy: "SUBCOMMANDS:").last!.components(separatedBy: "\n\n").first!
        let listed = block.split(separator: "\n")
            .filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }.compactMap { $0.split(separator: " ").first.map(String.init) }
        #expect(listed.count >= 13, "\(help)")
        for name in listed {
            #expect(Self.printsData.contains { $0.split(separator: " ")[0] == name } || Self.printsNoData[name] != nil,
                    "\(name) is new: does it print data (then give it --json and list it here)?")
        }
        for command in Self.printsData {
            let usage = try await runHandoff(command.split(separator: " ").map(String.init) + ["--help"]).output
            #expect(usage.contains("--json"), "`handoff \(command)` has no --json")
        }
    }

    @Test("keygen, plugins list (folder and agent), plugin, contacts, continue (agent, here, --save), advertise, activities and nodes print JSON that parses")
    func dataAsJSON() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("json-output-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        let key = try await runHandoff(["keygen", "tester", "--out", folder.path, "--json"])
        let made = try #require(objects(key.output, "keygen").first)
        #expect((made["publicKey"] as? String)?.count == 40)
        #expect(FileManager.default.fileExists(atPath: made["secretFile"] as? String ?? ""))

        let listed = objects(try await runHandoff(["plugins", "list", "--plugins", buildFolder.path, "--json"]).output, "plugins list")
        let contacts = try #require(listed.first { $0["name"] as? String == "contacts" }, "\(listed)")
        #expect((contacts["activityTypes"] as? [String])?.contains("org.handoff.contacts.list-contacts") == true)
        #expect(contacts["handlesStreams"] as? Bool == true)
        let refused = try await runHandoff(["plugins", "list", "--plugins", "/nonexistent/handoff-plugins", "--json"])
        #expect(refused.status == 1)
        #expect(objects(refused.output, "plugins list refused").first?["refused"] != nil, "\(refused.output)")

        let (broker, frontend, backend) = try await startBroker()
        let agents = TestAgents(frontend: frontend, backend: backend, plugins: buildFolder, folder: folder)
        defer { agents.stop() }
        let origin = try await agents.start("origin"), continuer = try await agents.start("continuer")

        let hosted = objects(try await runHandoff(["plugins", "list", "--agent", origin, "--json"]).output, "plugins list --agent")
        #expect(Set(hosted.compactMap { $0["name"] as? String }) == ["clipboard", "contacts", "notes"], "\(hosted)")
        #expect(hosted.allSatisfy { $0["abiVersion"] as? String != nil && $0["file"] as? String != nil })

        let added = objects(try await runHandoff(["plugin", "contacts", "add", "Ada", "Lovelace", "+44", "ada@example.org", "--agent", origin, "--json"]).output, "plugin")
        #expect(added.first?["plugin"] as? String == "contacts")
        #expect((added.first?["lines"] as? [String])?.count == 1, "\(added)")
        let listing = objects(try await runHandoff(["contacts", "--agent", origin, "--json", "list"]).output, "contacts")
        #expect((listing.first?["lines"] as? [String])?.first?.contains("Ada Lovelace") == true, "\(listing)")
        #expect(try await runHandoff(["contacts", "--agent", origin, "share"]).status == 0)

        let throughAgent = try await runHandoff(["continue", "--type", "org.handoff.contacts.list-contacts", "--agent", continuer, "--json"])
        #expect(throughAgent.status == 0, "\(throughAgent.error)")
        let continued = try #require(objects(throughAgent.output, "continue --agent").first)
        #expect(continued["activityType"] as? String == "org.handoff.contacts.list-contacts")
        #expect(continued["origin"] as? String == "origin")
        #expect(continued["milliseconds"] as? Double ?? 0 > 0, "\(continued)")

        let file = folder.appendingPathComponent("saved.bin")
        let saved = try await runHandoff(["continue", "--type", "org.handoff.contacts.list-contacts", "--save", file.path,
                                          "--broker", frontend, backend, "--json", "--log-level", "error"])
        #expect(saved.status == 0, "\(saved.error)")
        let outcome = try #require(objects(saved.output, "continue --save").first)
        #expect(outcome["saved"] as? String == file.path)
        #expect(outcome["bytes"] as? Int == (try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int), "\(outcome)")
        #expect(outcome["bytes"] as? Int ?? 0 > 0)

        let advertised = try await runHandoff(["advertise", "--type", "org.handoff.test.json", "--seconds", "0.3", "--broker", frontend, backend, "--json", "--log-level", "error"])
        let advertising = try #require(objects(advertised.output, "advertise").first)
        #expect(advertising["event"] as? String == "advertising" && advertising["activityType"] as? String == "org.handoff.test.json")

        let current = objects(try await runHandoff(["activities", "--broker", frontend, backend, "--json", "--log-level", "error"]).output, "activities")
        #expect(current.contains { $0["type"] as? String == "org.handoff.contacts.list-contacts" || $0["activityType"] as? String == "org.handoff.contacts.list-contacts" }, "\(current)")
        let nodes = objects(try await runHandoff(["nodes", "--broker", frontend, backend, "--json", "--log-level", "error"]).output, "nodes")
        #expect(Set(nodes.compactMap { $0["name"] as? String }).isSuperset(of: ["origin", "continuer"]), "\(nodes)")
        _ = broker
    }
}
