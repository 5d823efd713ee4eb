import Foundation
import Glibc
import Handoff
import Testing
import HandoffTestSupport

/// Copied files (`text/uri-list`, as file managers copy) through the clipboard plugin: their
/// content streamed as one bundle, written where the paste lands.
@Suite("Universal Clipboard: copied files", .exclusive, .serialized)
struct ClipboardFilesTests {
    func clipboard(_ deployment: ServedDeployment, on node: String, _ arguments: String...) async throws -> (status: Int32, output: String, error: String) {
        try await runHandoff(["plugin", "clipboard", "--agent", deployment.agent(node).control, "--"] + arguments)
    }

    /// Every file and folder under `root`, by relative path: its content (nil for a folder) and
    /// permission bits.
    func tree(_ root: URL) throws -> [String: (content: Data?, mode: Int)] {
        var found: [String: (content: Data?, mode: Int)] = [:]
        let manager = FileManager.default
        for path in try manager.subpathsOfDirectory(atPath: root.path) {
            let url = root.appendingPathComponent(path)
            let attributes = try manager.attributesOfItem(atPath: url.path)
            let folder = attributes[.type] as? FileAttributeType == .typeDirectory
            found[path] = (folder ? nil : try Data(contentsOf: url), (attributes[.posixPermissions] as? Int ?? 0) & 0o777)
        }
        return found
    }

    @Test("a folder and a file copied on one agent are pasted on another byte for byte, modes kept, streamed into a folder of the paste's own; `paste --out` puts them where asked")
    func filesCross() async throws {
        let deployment = try await ServedDeployment.start(agents: ["laptop", "desktop"])
        defer { deployment.stop() }
        #expect(await deployment.untilHealthy())
        let source = deployment.folder.appendingPathComponent("source")
        let project = source.appendingPathComponent("project")
        try FileManager.default.createDirectory(at: project.appendingPathComponent("src/empty folder"), withIntermediateDirectories: true)
        try Data("# Project\n".utf8).write(to: project.appendingPathComponent("README.md"))
        try Data("int main(void) { return 0; }\n".utf8).write(to: project.appendingPathComponent("src/main.c"))
        try Data("#!/bin/sh\necho built\n".utf8).write(to: project.appendingPathComponent("src/build script.sh"))
        chmod(project.appendingPathComponent("src/build script.sh").path, 0o755)
        try Data().write(to: project.appendingPathComponent("src/.keep"))
        var random = SystemRandomNumberGenerator()
        let photo = source.appendingPathComponent("photo é.bin")
        try Data((0..<(3 << 20)).map { _ in UInt8.random(in: 0...255, using: &random) }).write(to: photo)

        let copied = try await clipboard(deployment, on: "laptop", "copy", "--files", project.path, photo.path)
        #expect(copied.status == 0 && copied.output.contains("copied 2 files: project, photo é.bin") && copied.output.contains("offered"), "\(copied.output) \(copied.error)")
        #expect(await deployment.offersClipboard(titled: "Clipboard: 2 files: project, photo é.bin", within: .seconds(5)), "the laptop never offered its files")

        // A paste without --out: the files' paths on the desktop, one a line.
        let started = ContinuousClock.now
        let pasted = try await clipboard(deployment, on: "desktop", "paste")
        let latency = ContinuousClock.now - started
        #expect(pasted.status == 0, "\(pasted.output) \(pasted.error)")
        let paths = pasted.output.split(separator: "\n").map { URL(fileURLWithPath: String($0)) }
        #expect(paths.map(\.lastPathComponent) == ["project", "photo é.bin"], "\(pasted.output)")
        #expect(paths.allSatisfy { $0.path.hasPrefix(deployment.folder.appendingPathComponent("desktop").path) && $0.path.contains("/received/") }, "\(paths)")
        if paths.count == 2 {
            let sent = try tree(project), got = try tree(paths[0])
            #expect(Set(sent.keys) == Set(got.keys), "\(got.keys.sorted())")
            for (path, item) in sent {
                #expect(got[path]?.content == item.content && got[path]?.mode == item.mode, "\(path) changed on the way")
            }
            #expect(try Data(contentsOf: paths[1]) == Data(contentsOf: photo), "the photo changed on the way")
        }
        print("clipboard: a folder of 4 files and a 3 MiB file pasted on the other agent in \(latency)")

        // --out: copies of them in a folder of the user's choosing.
        let chosen = deployment.folder.appendingPathComponent("chosen")
        let placed = try await clipboard(deployment, on: "desktop", "paste", "--out", chosen.path)
        #expect(placed.status == 0 && placed.output.contains("pasted 2 files: project, photo é.bin copied on laptop into"), "\(placed.output) \(placed.error)")
        #expect(try Data(contentsOf: chosen.appendingPathComponent("project/src/main.c")) == Data("int main(void) { return 0; }\n".utf8))

        // A newer copy here replaces the pasted files (their folder goes); the copy's own files stay.
        let note = deployment.folder.appendingPathComponent("note.txt")
        try Data("newer".utf8).write(to: note)
        #expect(try await clipboard(deployment, on: "desktop", "copy", note.path).status == 0)
        #expect(!FileManager.default.fileExists(atPath: paths[0].path), "the pasted files outlived the copy that replaced them")
        #expect(FileManager.default.fileExists(atPath: chosen.appendingPathComponent("project").path))

        // Files over the limit are refused at the copy, in words.
        #expect(try await clipboard(deployment, on: "laptop", "limit", "1000").status == 0)
        let tooBig = try await clipboard(deployment, on: "laptop", "copy", "--files", photo.path)
        #expect(tooBig.status != 0 && tooBig.error.contains("over the clipboard's limit of 1000"), "\(tooBig.error)")
    }

    @Test("a member that offers files and sends a bundle whose path leaves its folder gets a typed refusal: nothing is written outside, the paste fails in words, and the node's clipboard is unchanged")
    func hostileBundleRefused() async throws {
        let deployment = try await ServedDeployment.start(agents: ["desktop"])
        defer { deployment.stop() }
        #expect(await deployment.untilHealthy())
        let note = deployment.folder.appendingPathComponent("note.txt")
        try Data("kept".utf8).write(to: note)
        #expect(try await clipboard(deployment, on: "desktop", "copy", note.path).status == 0)

        // The bundle: a file named "../escape.txt", then its bytes.
        let name = Array("../escape.txt".utf8)
        var bundle = Data("HFB1".utf8)
        bundle.append(2)
        bundle.append(contentsOf: [UInt8(name.count >> 8), UInt8(name.count & 0xFF)] + name)
        bundle.append(contentsOf: [0x01, 0xA4] + [UInt8](repeating: 0, count: 7) + [5])
        bundle.append(contentsOf: Array("owned".utf8) + [0])
        let peer = StreamPeer(sending: bundle)
        try await Node.withRunning(brokerConfiguration("mallory", frontend: deployment.frontend, backend: deployment.backend, interval: .seconds(2))) { mallory in
            let offer = try UserActivity(activityType: "org.handoff.clipboard")
            offer.title = "Clipboard: 1 file: report.pdf"
            offer.userInfo = ["mimeTypes": .list([.string("text/uri-list")]), "size": .int(Int64(bundle.count)),
                              "copiedAt": .double(Date().timeIntervalSince1970 + 60), "files": .int(1)]
            offer.keywords = ["text/uri-list"]
            offer.supportsContinuationStreams = true
            offer.delegate = peer
            try await offer.becomeCurrent(on: mallory)
            let refused = try await eventuallyResult(within: .seconds(10)) {
                let result = try await clipboard(deployment, on: "desktop", "paste")
                return result.error.contains("leaves its folder") ? result : nil
            }
            #expect(refused?.status ?? 0 != 0, "the desktop took the bundle: \(String(describing: refused))")
            await offer.invalidate()
        }
        let escaped = FileManager.default.enumerator(atPath: deployment.folder.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix("escape.txt") } ?? []
        #expect(escaped.isEmpty, "written outside its folder: \(escaped)")
        let received = try FileManager.default.subpathsOfDirectory(atPath: deployment.folder.appendingPathComponent("desktop").path).filter { $0.contains("/received/") }
        #expect(received.isEmpty, "the refused paste left files behind: \(received)")
        #expect(await eventually(within: .seconds(10)) { (try? await clipboard(deployment, on: "desktop", "paste").output) == "kept\n" }, "the desktop lost its own copy")
    }
}

/// Runs `body` until it returns a value or `timeout` passes, plus what the machine held the
/// process back meanwhile (then nil).
func eventuallyResult<T>(within timeout: Duration, _ body: () async throws -> T?) async throws -> T? {
    let deadline = WaitDeadline(timeout)
    while !deadline.passed {
        if let value = try await body() { return value }
        try await Task.sleep(for: .milliseconds(100))
    }
    return nil
}
