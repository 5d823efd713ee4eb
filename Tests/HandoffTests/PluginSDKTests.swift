import Foundation
import Glibc
import Testing
import HandoffTestSupport

/// Runs a command to completion in `folder`; returns its status and output (both streams).
private func run(_ arguments: [String], in folder: URL, environment: [String: String] = [:], timeout: Duration = .seconds(600)) async throws -> (status: Int32, output: String) {
    // Watched: make or swift build ends with a run killed mid-build (a compiler it started
    // finishes its file and exits).
    let process = Process.watched(URL(fileURLWithPath: "/usr/bin/env"), arguments)
    process.currentDirectoryURL = folder
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let log = folder.appendingPathComponent(".run-\(UUID().uuidString).log")
    _ = FileManager.default.createFile(atPath: log.path, contents: nil)
    let handle = try FileHandle(forWritingTo: log)
    process.standardOutput = handle
    process.standardError = handle
    try process.spawn()
    // Reaped however this returns (a timeout, a cancelled sleep): SIGKILL ends the watched program.
    defer { reap(process) }
    let deadline = ContinuousClock.now + timeout
    while process.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
    if process.isRunning { throw ProcessFailure("\(arguments.joined(separator: " ")) did not finish within \(timeout)") }
    try handle.close()
    defer { try? FileManager.default.removeItem(at: log) }
    return (process.terminationStatus, String(decoding: try Data(contentsOf: log), as: UTF8.self))
}

@Suite("The plugin SDK: a third party's first plugin", .exclusive, .serialized)
struct PluginSDKTests {
    @Test("install the SDK, `handoff plugins new` a C and a Swift plugin outside the repository, build each with one command, load them into running agents, answer `handoff plugin NAME`, continue their activities")
    func firstPlugins() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-sdk-\(UUID().uuidString)")
        let sdk = root.appendingPathComponent("sdk"), work = root.appendingPathComponent("work")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }

        let installed = try await run(["bash", repositoryRoot.appendingPathComponent("scripts/install-sdk").path, "--prefix", sdk.path], in: work)
        try #require(installed.status == 0, "\(installed.output)")
        let environment = ["PKG_CONFIG_PATH": sdk.appendingPathComponent("lib/pkgconfig").path]
        let cflags = try await run(["pkg-config", "--cflags", "handoff-plugin"], in: work, environment: environment)
        #expect(cflags.output.trimmingCharacters(in: .whitespacesAndNewlines) == "-I\(sdk.path)/include/handoff", "\(cflags.output)")

        let handoff = buildFolder.appendingPathComponent("handoff").path
        for (name, language) in [("greeter", "c"), ("swift-greeter", "swift")] {
            let made = try await run([handoff, "plugins", "new", name, "--lang", language, "--out", work.path], in: work, environment: environment)
            #expect(made.status == 0, "\(made.output)")
        }
        // One command each: make, and swift build (debug here, to keep the test short).
        let c = try await run(["make"], in: work.appendingPathComponent("greeter"), environment: environment)
        try #require(c.status == 0, "make: \(c.output)")
        let swift = try await run(["swift", "build"], in: work.appendingPathComponent("swift-greeter"), environment: environment)
        try #require(swift.status == 0, "swift build: \(swift.output)")

        let plugins = root.appendingPathComponent("plugins")
        try FileManager.default.createDirectory(at: plugins, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: work.appendingPathComponent("greeter/libhandoff-greeter.so"), to: plugins.appendingPathComponent("libhandoff-greeter.so"))
        try FileManager.default.copyItem(at: work.appendingPathComponent("swift-greeter/.build/debug/libhandoff-swift-greeter.so"),
                                         to: plugins.appendingPathComponent("libhandoff-swift-greeter.so"))

        let (broker, frontend, backend) = try await startBroker()
        var agents: [Process] = []
        defer { for agent in agents { agent.terminate(); agent.waitUntilExit() } }
        func startAgent(_ name: String) async throws -> (control: String, log: URL) {
            let control = "ipc://\(root.path)/\(name).sock", log = root.appendingPathComponent("\(name).log")
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            agents.append(try await startAgentProcess(name, frontend: frontend, backend: backend, plugins: plugins,
                                                      data: root.appendingPathComponent(name), control: control,
                                                      standardError: try FileHandle(forWritingTo: log), arguments: []))
            return (control, log)
        }
        let a = try await startAgent("sdk-a"), b = try await startAgent("sdk-b")
        let listed = try await runHandoff(["plugins", "list", "--agent", a.control, "--json"])
        #expect(listed.output.contains(#""name":"greeter""#) && listed.output.contains(#""name":"swift-greeter""#), "\(listed.output)")

        for name in ["greeter", "swift-greeter"] {
            let hello = try await runHandoff(["plugin", name, "hello", "--agent", a.control])
            #expect(hello.output == "hello from \(name) on sdk-a\n", "\(hello.output) \(hello.error)")
            let opened = try await runHandoff(["plugin", name, "open", "Notes from \(name)", "--agent", a.control])
            #expect(opened.status == 0, "\(opened.error)")
            let continued = try await runHandoff(["continue", "--type", "com.example.\(name).open", "--agent", b.control, "--json"])
            #expect(continued.status == 0, "\(continued.error)")
            #expect(continued.output.contains(#""title":"Notes from \#(name)""#), "\(continued.output)")
        }
        let restored = await eventually {
            let log = (try? String(contentsOf: b.log, encoding: .utf8)) ?? ""
            return log.contains("continued \"Notes from greeter\" from sdk-a") && log.contains("continued \"Notes from swift-greeter\" from sdk-a")
        }
        #expect(restored, "the plugins' restore handlers did not run on sdk-b: \((try? String(contentsOf: b.log, encoding: .utf8)) ?? "")")
        _ = broker
    }
}
