import Foundation
import Glibc
import Handoff
import Testing
import ZeroMQ
import HandoffTestSupport

/// Where Chromium (Debian's `chromium`) is, if it is installed.
let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) }

/// Whether a missing Chromium fails the test rather than skipping it: CI and `scripts/test`
/// install it (scripts/lib.sh), and a page test that silently skipped would check nothing.
let chromiumRequired = ProcessInfo.processInfo.environment["CI"] != nil
    || ProcessInfo.processInfo.environment["HANDOFF_REQUIRE_CHROMIUM"] == "1"

/// Where tests leave what CI keeps (the page's screenshot): `$HANDOFF_ARTIFACTS`, else
/// `.build/artifacts` of the repository.
let artifactsFolder: URL = {
    let folder = ProcessInfo.processInfo.environment["HANDOFF_ARTIFACTS"].map { URL(fileURLWithPath: $0) }
        ?? repositoryRoot.appendingPathComponent(".build/artifacts")
    try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    return folder
}()

/// What the page rendered, as `read_page.py` reports it.
struct RenderedPage: Decodable {
    let nodes: [String]
    let types: [String]
    let rate: String
    let points: [Int]
    let continued: String
    let status: String
}

@Suite("The live page and `handoff top` on a real broker and agents", .exclusive, .serialized)
struct LivePageTests {
    /// Loads `url` in headless Chromium until the page shows `nodes` and a rate that moved; what
    /// it rendered, and its screenshot at `screenshot`.
    func render(_ url: String, expecting nodes: [String], screenshot: URL) async throws -> (ready: Bool, page: RenderedPage?, raw: String) {
        let ready = """
            (() => { const names = [...document.querySelectorAll("#nodes tr[data-node]")].map(r => r.dataset.node);
              return \(String(decoding: try JSONEncoder().encode(nodes), as: UTF8.self)).every(n => names.includes(n))
                && Number(document.getElementById("rate").textContent) > 0
                && document.querySelectorAll("#types tr[data-type]").length > 0; })()
            """
        let report = """
            ({ nodes: [...document.querySelectorAll("#nodes tr[data-node]")].map(r => r.dataset.node),
               types: [...document.querySelectorAll("#types tr[data-type]")].map(r => r.dataset.type),
               rate: document.getElementById("rate").textContent,
               points: (document.getElementById("chart").dataset.points || "").split(",").filter(p => p).map(Number),
               continued: document.getElementById("continuations").textContent,
               status: document.getElementById("status").textContent })
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [repositoryRoot.appendingPathComponent("Tests/HandoffTests/Fixtures/read_page.py").path, url, screenshot.path, ready, report, "30"]
        let output = Spawning.pipe(), error = Spawning.pipe()
        process.standardOutput = output
        process.standardError = error
        try process.spawn()
        defer { reap(process) }
        let said = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let errors = String(decoding: error.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let raw = String(decoding: said, as: UTF8.self) + errors
        return (process.terminationStatus == 0, try? JSONDecoder().decode(RenderedPage.self, from: said), raw)
    }

    @Test("headless Chromium loads a broker's page while the contacts story runs: both agents, the contacts type, a rate that moved, a continuation; an agent's /view.json and `top --json` agree; the view subscribes only once someone looks",
          .enabled(if: chromium != nil || chromiumRequired, "chromium is not installed (apt-get install chromium); CI installs and requires it"))
    func pageInChromium() async throws {
        try #require(chromium != nil, "chromium is not installed (apt-get install chromium), and CI requires it")
        let deployment = try await ServedDeployment.start(agents: ["origin", "continuer"])
        defer { deployment.stop() }
        let (frontend, backend, brokerPort) = (deployment.frontend, deployment.backend, deployment.brokerPort)
        let originPort = deployment.agent("origin").port
        #expect(await deployment.untilHealthy())

        // Nobody looks yet: the broker has only the agents' subscriptions, no view's.
        func subscriptions() throws -> Double { try deployment.brokerSubscriptions() ?? 0 }
        let before = try subscriptions()
        try await Task.sleep(for: .milliseconds(500))
        #expect(try subscriptions() == before, "something subscribed while nobody looked")

        // The contacts story: the origin shares its list, the continuer continues it (a stream).
        try await deployment.shareContacts(["Ada", "Grace"], on: "origin")
        let first = try httpGet(port: brokerPort, path: "/view.json")
        #expect(first.status == 200)
        #expect(await eventually(within: .seconds(5)) { ((try? subscriptions()) ?? 0) > before }, "the view subscribed when first asked")
        let continued = try await runHandoff(["continue", "--type", "org.handoff.contacts.list-contacts", "--agent", deployment.agent("continuer").control])
        #expect(continued.status == 0, "\(continued.error)")

        let screenshot = artifactsFolder.appendingPathComponent("live-page.png")
        let (ready, page, raw) = try await render("http://127.0.0.1:\(brokerPort)/", expecting: ["origin", "continuer"], screenshot: screenshot)
        #expect(ready, "the page never showed both agents and a rate: \(raw)")
        let rendered = try #require(page, "\(raw)")
        #expect(rendered.status == "live")
        #expect(rendered.types.contains { $0.hasPrefix("org.handoff.contacts") }, "\(rendered.types)")
        #expect(rendered.points.count == 60 && rendered.points.reduce(0, +) > 0, "\(rendered.points)")
        #expect(Int(rendered.continued) ?? 0 >= 1, "the continuation's event: \(rendered.continued)")
        #expect(FileManager.default.fileExists(atPath: screenshot.path))
        print("the live page's screenshot: \(screenshot.path)")

        // The agent's page watches the bus through its own connection, with its node's refusals.
        let agentView = try JSONDecoder().decode(BusViewSnapshot.self, from: Data(try httpGet(port: originPort, path: "/view.json").body.utf8))
        #expect(agentView.source.hasPrefix("agent origin"))
        // A refusal it really counted: garbage published on the bus passes the broker (which
        // forwards what it cannot read) and reaches the agent, which ignores it as malformed.
        let context = try Context()
        let garbage = try context.socket(.xpub)
        try garbage.connect(frontend)
        // Sent once the broker's subscribe-all has reached it (before, libzmq drops what it sends).
        try #require(try await receiveUntil(garbage, within: .seconds(5)) { $0.bytes == subscription("") }, "the broker never subscribed")
        try await garbage.send(Array("P:garbage".utf8), more: true)
        try await garbage.send([0xFF, 0x01])
        func malformedSeen() -> UInt64 {
            let body = (try? httpGet(port: originPort, path: "/view.json").body) ?? ""
            return (try? JSONDecoder().decode(BusViewSnapshot.self, from: Data(body.utf8)))?.refusals["malformed_bus"] ?? 0
        }
        #expect(await eventually(within: .seconds(5)) { malformedSeen() >= 1 }, "the agent's view counts no malformed input: \(agentView.refusals)")
        garbage.close()
        #expect(await eventually(within: .seconds(5)) {
            let view = try? JSONDecoder().decode(BusViewSnapshot.self, from: Data((try? httpGet(port: originPort, path: "/view.json").body)?.utf8 ?? "".utf8))
            return Set(view?.nodes.map(\.name) ?? []).isSuperset(of: ["origin", "continuer"])
        })

        // `handoff top --json`, on the bus itself and from the broker's page.
        for arguments in [["top", "--broker", frontend, backend, "--json", "--wait", "2.5"], ["top", "--from", "127.0.0.1:\(brokerPort)", "--json", "--wait", "0"]] {
            let top = try await runHandoff(arguments)
            #expect(top.status == 0, "\(arguments): \(top.error)")
            let view = try JSONDecoder().decode(BusViewSnapshot.self, from: Data(top.output.utf8))
            let origin = try #require(view.nodes.first { $0.name == "origin" }, "\(arguments): \(top.output)")
            #expect(origin.activities >= 1 && (origin.traffic?.messagesOut ?? 0) > 0, "\(arguments): \(origin)")
            #expect(view.types.contains { $0.type.hasPrefix("org.handoff.contacts") }, "\(arguments): \(view.types)")
        }
        // A screen of the table, not a terminal: no escape codes, the nodes listed.
        let screen = try await runHandoff(["top", "--broker", frontend, backend, "--count", "1", "--sort", "bytes-out"])
        #expect(screen.status == 0 && screen.output.contains("origin") && screen.output.contains("continuer") && !screen.output.contains("\u{1B}["), "\(screen.output)")
    }

    @Test("over CURVE: a secure broker's page watches through its inproc endpoint (no key of the account needed), an agent's with the node's own key")
    func securePages() async throws {
        let ports = try freePorts(2)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("live-page-curve-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let keys = folder.appendingPathComponent("keys")
        for name in ["broker", "node"] { #expect(try await runHandoff(["keygen", name, "--out", keys.path]).status == 0) }
        let (broker, brokerPort) = try await startServingMetrics(
            ["broker", "--frontend", ports[0], "--backend", ports[1], "--key", keys.appendingPathComponent("broker.key").path],
            log: folder.appendingPathComponent("broker.log"))
        defer { reap(broker) }
        let (agent, agentPort) = try await startServingMetrics([
            "agent", "--name", "secure-node", "--broker", ports[0], ports[1], "--key", keys.appendingPathComponent("node.key").path,
            "--broker-key", keys.appendingPathComponent("broker.pub").path, "--data", folder.appendingPathComponent("data").path,
            "--control", "ipc://\(folder.path)/control.sock"], log: folder.appendingPathComponent("agent.log"))
        defer { reap(agent) }
        func names(_ port: Int) -> Set<String> {
            let body = (try? httpGet(port: port, path: "/view.json").body) ?? ""
            return Set((try? JSONDecoder().decode(BusViewSnapshot.self, from: Data(body.utf8)))?.nodes.map(\.name) ?? [])
        }
        #expect(await eventually(within: .seconds(10)) { names(brokerPort).contains("secure-node") }, "the broker's page: \(names(brokerPort))")
        #expect(await eventually(within: .seconds(10)) { names(agentPort).contains("secure-node") }, "the agent's page: \(names(agentPort))")
    }

    @Test("--live-page off serves no page; a page refuses what it does not serve")
    func pageOff() async throws {
        let deployment = try await ServedDeployment.start(agents: [], brokerArguments: ["--live-page", "off"])
        defer { deployment.stop() }
        let port = deployment.brokerPort
        #expect(try httpGet(port: port, path: "/").status == 404)
        #expect(try httpGet(port: port, path: "/view.json").status == 404)
        #expect(try httpGet(port: port, path: "/metrics").status == 200)
    }
}

@Suite("handoff top's table", .exclusive, .serialized)
struct TopTableTests {
    @Test("top's node column is as wide as the longest name: two names alike in their first 30 characters read apart")
    func longNamesWhole() async throws {
        let names = ["site-b-contacts-agent-on-rack-7-host-01", "site-b-contacts-agent-on-rack-7-host-02"]
        let deployment = try await ServedDeployment.start(agents: names)
        defer { deployment.stop() }
        // Off a terminal every cell is whole: each name once, in full, on its own line.
        var screen = ""
        #expect(await eventually(within: .seconds(15)) {
            screen = (try? await runHandoff(["top", "--broker", deployment.frontend, deployment.backend, "--count", "1"]).output) ?? ""
            return names.allSatisfy { name in screen.split(separator: "\n").contains { $0.hasPrefix(name + " ") } }
        }, "\(screen)")
        #expect(!screen.contains("…"), "\(screen)")
    }
}
