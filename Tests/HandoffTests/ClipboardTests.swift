import Foundation
import Testing
import HandoffTestSupport

/// The clipboard plugin (Plugins/Clipboard) between two agents through a broker, each in a
/// process of its own, driven with `handoff plugin clipboard` as a user (or a script) would.
@Suite("Universal Clipboard: copy on one agent, paste on another", .exclusive, .serialized)
struct ClipboardTests {
    /// `handoff plugin clipboard ARGS --agent EP`: its status and output.
    func clipboard(_ deployment: ServedDeployment, on node: String, _ arguments: String...) async throws -> (status: Int32, output: String, error: String) {
        try await runHandoff(["plugin", "clipboard", "--agent", deployment.agent(node).control, "--"] + arguments)
    }

    /// The clipboard offers on the bus, as `handoff activities` lists them: (node, title).
    func offers(_ deployment: ServedDeployment) async throws -> [(node: String, title: String)] {
        let listed = try await runHandoff(["activities", "--broker", deployment.frontend, deployment.backend, "--type", "org.handoff.clipboard", "--json"])
        return listed.output.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return ((object["node"] as? String) ?? (object["origin"] as? String) ?? "?", object["title"] as? String ?? "")
        }
    }

    @Test("text and a 20 MiB image cross byte for byte when pasted; the newest copy wins; secret and paused copies are never offered; receive-only, expiry and the size limit hold")
    func copyAndPaste() async throws {
        let deployment = try await ServedDeployment.start(agents: ["laptop", "desktop"])
        defer { deployment.stop() }
        #expect(await deployment.untilHealthy())
        let files = deployment.folder

        // Text: copied on the laptop, offered (its preview, not its content), pasted on the desktop.
        let text = files.appendingPathComponent("note.txt")
        try Data("Meet at 10:30 in room B\nbring the draft".utf8).write(to: text)
        let copied = try await clipboard(deployment, on: "laptop", "copy", text.path)
        #expect(copied.status == 0 && copied.output.contains("offered to the account"), "\(copied.output) \(copied.error)")
        var seen: [(node: String, title: String)] = []
        let offered = await eventually(within: .seconds(5)) {
            seen = (try? await offers(deployment)) ?? []
            return seen.contains { $0.node == "laptop" && $0.title == "Clipboard: Meet at 10:30 in room B bring the draft" }
        }
        #expect(offered, "\(seen)")
        let started = ContinuousClock.now
        let pasted = try await clipboard(deployment, on: "desktop", "paste")
        let textLatency = ContinuousClock.now - started
        #expect(pasted.status == 0 && pasted.output == "Meet at 10:30 in room B\nbring the draft\n", "\(pasted.output) \(pasted.error)")

        // A 20 MiB image, byte for byte.
        let image = files.appendingPathComponent("big.png")
        var bytes = [UInt8](repeating: 0, count: 20 << 20)
        var generator = SystemRandomNumberGenerator()
        for index in stride(from: 0, to: bytes.count, by: 8) {
            withUnsafeBytes(of: generator.next()) { random in for offset in 0..<8 { bytes[index + offset] = random[offset] } }
        }
        bytes.replaceSubrange(0..<8, with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        try Data(bytes).write(to: image)
        #expect(try await clipboard(deployment, on: "laptop", "copy", image.path).output.contains("(image/png), offered"))
        let imageStarted = ContinuousClock.now
        let out = files.appendingPathComponent("pasted.png")
        let pastedImage = try await clipboard(deployment, on: "desktop", "paste", "--out", out.path, "--type", "image/png")
        let imageLatency = ContinuousClock.now - imageStarted
        #expect(pastedImage.status == 0, "\(pastedImage.output) \(pastedImage.error)")
        #expect(try Data(contentsOf: out) == Data(bytes), "the image changed on the way")
        print("clipboard: text pasted in \(textLatency), a 20 MiB image in \(imageLatency) (copy to paste, two agents and a broker on this machine)")

        // Newest wins: the desktop copies after the laptop; a paste on either gets the desktop's.
        try Data("desktop words".utf8).write(to: text)
        #expect(try await clipboard(deployment, on: "desktop", "copy", text.path).status == 0)
        let own = files.appendingPathComponent("own.txt")
        let ownPaste = try await clipboard(deployment, on: "desktop", "paste", "--out", own.path)
        #expect(ownPaste.output.contains("copied on this node"), "the desktop pulled the laptop's older copy: \(ownPaste.output)")
        #expect(try String(contentsOf: own, encoding: .utf8) == "desktop words")
        #expect(await eventually(within: .seconds(5)) { (try? await clipboard(deployment, on: "laptop", "paste").output) == "desktop words\n" })

        // A password manager's copy: kept here, never offered (the desktop's offer stays the only one).
        try Data("hunter2".utf8).write(to: text)
        let secret = try await clipboard(deployment, on: "laptop", "copy", text.path, "--secret")
        #expect(secret.output.contains("not offered to other nodes: marked secret"), "\(secret.output)")
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await offers(deployment).allSatisfy { !$0.title.contains("hunter2") })
        #expect(try await clipboard(deployment, on: "desktop", "paste").output == "desktop words\n", "the secret crossed")

        // Paused: not offered either.
        #expect(try await clipboard(deployment, on: "laptop", "pause").status == 0)
        try Data("while paused".utf8).write(to: text)
        #expect(try await clipboard(deployment, on: "laptop", "copy", text.path).output.contains("not offered: paused"))
        #expect(try await clipboard(deployment, on: "laptop", "resume").status == 0)

        // Expiry: an offer of one second is gone when the desktop pastes two seconds later.
        #expect(try await clipboard(deployment, on: "laptop", "expiry", "1").status == 0)
        try Data("short-lived".utf8).write(to: text)
        #expect(try await clipboard(deployment, on: "laptop", "copy", text.path).status == 0)
        try await Task.sleep(for: .seconds(2))
        #expect(try await clipboard(deployment, on: "desktop", "paste").output == "desktop words\n", "an expired copy was pasted")

        // The desktop's limit: a copy over it is refused before any byte moves.
        #expect(try await clipboard(deployment, on: "laptop", "expiry", "120").status == 0)
        #expect(try await clipboard(deployment, on: "desktop", "limit", "10").status == 0)
        try Data("more than ten bytes".utf8).write(to: text)
        #expect(try await clipboard(deployment, on: "laptop", "copy", text.path).status == 0)
        let refused = try await clipboard(deployment, on: "desktop", "paste")
        #expect(refused.status != 0 && refused.error.contains("over this node's limit of 10"), "\(refused.output) \(refused.error)")

        // Send-only: a paste is refused outright.
        #expect(try await clipboard(deployment, on: "desktop", "mode", "send").status == 0)
        let sendOnly = try await clipboard(deployment, on: "desktop", "paste")
        #expect(sendOnly.status != 0 && sendOnly.error.contains("only sends"), "\(sendOnly.error)")
        let status = try await clipboard(deployment, on: "desktop", "status")
        #expect(status.output.contains("mode send") && status.output.contains("limit 10 bytes"), "\(status.output)")
    }
}
