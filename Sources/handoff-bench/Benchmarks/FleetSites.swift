import Foundation
import Handoff
import ZeroMQ

// `handoff-bench fleet --sites N`: a fleet across sites. A hub broker and N site brokers (real
// `handoff broker` processes, each site's joined to the hub with --upstream), the simulated nodes
// spread evenly over the sites (`fleet-nodes` processes, each on its own site's broker), and at each
// site one real node (`fleet-watcher`) following every activity of the fleet. It records the join,
// the time until every site's node knows every activity, and, at rest, the messages on each link
// between a site and the hub, each broker's CPU and memory; and it checks what sites promise: no
// message comes back to the site it came from, and the hub sends every message to each other site
// once (every site follows everything here), so down the links go exactly N − 1 copies of what
// comes up.

/// A `handoff broker` process and the counters its log says.
private struct SiteBrokerProcess {
    let name: String
    let process: SpawnedProcess
    let frontend: String
    let backend: String
    let log: URL

    /// The counters of its last "broker counters" line (one a second, `--stats-interval 1`), and
    /// how many such lines there are: seconds of the broker's own clock.
    func counters() -> (lines: Int, values: [String: Int]) {
        guard let text = try? String(contentsOf: log, encoding: .utf8) else { return (0, [:]) }
        let lines = text.split(separator: "\n").filter { $0.contains("broker counters") }
        var counters: [String: Int] = [:]
        for word in lines.last?.split(separator: " ") ?? [] {
            let parts = word.split(separator: "=", maxSplits: 1)
            if parts.count == 2, let value = Int(parts[1]) { counters[String(parts[0])] = value }
        }
        return (lines.count, counters)
    }

    func stop() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

func benchFleetSites(nodes count: Int, perNode: Int, sites siteCount: Int, steadySeconds: Double, lapse: Bool = false) throws {
    let interval = 2.0
    try raiseDescriptorLimit(to: count + 1_024)
    let context = try Context(maxSockets: 64)
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-fleet-sites-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    // HANDOFF_BENCH_KEEP=1 keeps the brokers' logs (their counters every second) and says where.
    let keep = ProcessInfo.processInfo.environment["HANDOFF_BENCH_KEEP"] == "1"
    defer { if keep { print("the brokers' logs: \(folder.path)") } else { try? FileManager.default.removeItem(at: folder) } }
    func startBroker(_ name: String, upstream: SiteBrokerProcess?) throws -> SiteBrokerProcess {
        let (frontend, backend) = (try freeEndpoint(context), try freeEndpoint(context))
        let log = folder.appendingPathComponent("\(name).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let arguments = ["broker", "--frontend", frontend, "--backend", backend, "--site", name, "--stats-interval", "1", "--log-level", "info"]
            + (upstream.map { ["--upstream", $0.frontend, $0.backend] } ?? [])
        let process = try startHandoff(arguments, output: try FileHandle(forWritingTo: log))
        return SiteBrokerProcess(name: name, process: process, frontend: frontend, backend: backend, log: log)
    }
    let hub = try startBroker("hub", upstream: nil)
    defer { hub.stop() }
    Thread.sleep(forTimeInterval: 0.3)
    let sites = try (0..<siteCount).map { try startBroker("site-\($0)", upstream: hub) }
    defer { for site in sites { site.stop() } }
    Thread.sleep(forTimeInterval: 0.5)
    let emptyRSS = sites.map { residentBytes($0.process.processIdentifier) }

    // The nodes, evenly over the sites, at most 4,000 to a process (two descriptors a node).
    let connecting = ContinuousClock.now
    var groups: [Child] = []
    defer { for group in groups { if group.process.isRunning { group.process.terminate() }; group.wait() } }
    for (index, site) in sites.enumerated() {
        let first = count * index / siteCount, end = count * (index + 1) / siteCount
        for start in stride(from: first, to: end, by: 4_000) {
            groups.append(try Child(["fleet-nodes", "--frontend", site.frontend, "--first", "\(start)", "--nodes", "\(min(4_000, end - start))",
                                     "--per-node", "\(perNode)", "--lease-ms", "\(Int(interval * 3000))", "--interval-ms", "\(Int(interval * 1000))",
                                     "--seconds", "\(steadySeconds + 20)", "--keep-alive", "presence"]))
        }
    }
    for group in groups { _ = try group.line(startingWith: "CONNECTED", within: .seconds(120)) }
    let connectSeconds = seconds(ContinuousClock.now - connecting)
    let total = count * perNode
    // A real node at the first site follows every activity of the fleet; at every site a plain
    // subscriber follows the same (its broker then follows it upstream) and counts what comes, so
    // that every site takes everything in without a node's CPU each on this machine.
    let watcher = try Child(["fleet-watcher", "--frontend", sites[0].frontend, "--backend", sites[0].backend, "--expect", "\(total)"])
    defer { if watcher.process.isRunning { watcher.process.terminate() }; watcher.wait() }
    let listeners = try sites.map { site -> Socket in
        let socket = try context.socket(.sub)
        try socket.set(.receiveHighWaterMark, 0)
        try socket.subscribe("A:org.fleet.")
        try socket.subscribe("P:")
        try socket.connect(site.backend)
        return socket
    }
    defer { for listener in listeners { listener.close() } }
    var heard = Array(repeating: 0, count: siteCount)
    func listen(for duration: Double) throws {
        let until = ContinuousClock.now + .milliseconds(Int(duration * 1000))
        repeat {
            for (index, listener) in listeners.enumerated() {
                while let frame = try listener.tryReceive() { if !frame.hasMore { heard[index] += 1 } }
            }
            Thread.sleep(forTimeInterval: 0.01)
        } while ContinuousClock.now < until
    }
    _ = try watcher.line(startingWith: "READY")
    try listen(for: 1)
    // The nodes advertise, then keep their activities alive by presence at once, as nodes do, for
    // longer than it takes to know everything and then rest for `steadySeconds`.
    let advertising = ContinuousClock.now
    for group in groups { try group.send("ADVERTISE") }
    if lapse {
        // Silent for longer than a lease, as across a cut: every cache forgets the fleet, and
        // the first presences list what the brokers lack.
        try listen(for: interval * 3 + 1)
    }
    for group in groups { try group.send("REST") }
    _ = try watcher.line(startingWith: "KNOWN", within: .seconds(30))
    let knownSeconds = seconds(ContinuousClock.now - advertising)

    // At rest: the counters (logged each second) and CPU over `steadySeconds`, from a second
    // after the first site's node knew everything.
    try listen(for: 1)
    let everyone = [hub] + sites
    let before = everyone.map { $0.counters() }
    let cpuBefore = everyone.map { cpuSeconds($0.process.processIdentifier) }
    let heardBefore = heard
    let started = ContinuousClock.now
    try listen(for: steadySeconds)
    let elapsed = seconds(ContinuousClock.now - started)
    let after = everyone.map { $0.counters() }
    let cpu = everyone.indices.map { (cpuSeconds(everyone[$0].process.processIdentifier) - cpuBefore[$0]) / elapsed }
    let rss = everyone.map { residentBytes($0.process.processIdentifier) }
    let heardPerSecond = heard.indices.map { Double(heard[$0] - heardBefore[$0]) / elapsed }
    watcher.closeInput()
    let known = Int(try watcher.line(startingWith: "COUNT")[1]) ?? -1
    // (The nodes would rest on: they are ended here.)
    for group in groups { group.process.terminate() }
    func delta(_ index: Int, _ key: String) -> Double {
        let seconds = Double(max(1, after[index].lines - before[index].lines))
        return Double((after[index].values[key] ?? 0) - (before[index].values[key] ?? 0)) / seconds
    }

    print("")
    print("Fleet across sites: \(count) simulated nodes × \(perNode) activities over \(siteCount) sites (a broker each, joined to one hub), "
        + "presence every \(Int(interval)) s, measured over \(Int(steadySeconds)) s at rest")
    row("all nodes connected to their sites, s", String(format: "%.2f", connectSeconds))
    row("every activity known to a node at site-0, s", String(format: "%.2f", knownSeconds),
        lapse ? "after advertising, silent past the lease, then presence" : "after advertising, presence from then on")
    row("activities that node knows at the end", "\(known)", "of \(total)")
    row("heard at each site's backend at rest, msg/s", String(format: "%.0f", heardPerSecond.min() ?? 0),
        "the least of a plain subscriber's at each site: " + heardPerSecond.map { String(format: "%.0f", $0) }.joined(separator: ", "))
    for (index, site) in sites.enumerated() {
        let i = index + 1
        row("\(site.name): up / down the link, msg/s", String(format: "%.0f / %.0f", delta(i, "upstream-out"), delta(i, "upstream-in")),
            String(format: "CPU %.1f %%, RSS %d MiB (%d empty)", cpu[i] * 100, rss[i] / 1_048_576, emptyRSS[index] / 1_048_576))
    }
    let (sitesIn, sitesOut) = (delta(0, "sites-in"), delta(0, "sites-out"))
    row("hub: from the sites / copies down, msg/s", String(format: "%.0f / %.0f", sitesIn, sitesOut),
        String(format: "CPU %.1f %%, RSS %d MiB", cpu[0] * 100, rss[0] / 1_048_576))
    let final = after.map(\.values)
    let returned = sites.indices.map { final[$0 + 1]["upstream-returned"] ?? 0 }.reduce(0, +)
    let loops = final.map { $0["site-loops"] ?? 0 }.reduce(0, +)
    let asked = final.map { ($0["readvertise-requests"] ?? 0) + ($0["readvertise-everyone"] ?? 0) }.reduce(0, +)
    row("back to their own site / dropped as loops", "\(returned) / \(loops)", "the whole run, every broker")
    row("requests to advertise again", "\(asked)", "the whole run, every broker (R: and subscribe-all)")
    let ratio = sitesIn > 0 ? sitesOut / sitesIn : 0
    compare("fleet across \(siteCount) sites: copies down per message up (\(count) nodes × \(perNode))", handoff: String(format: "%.3f", ratio),
            baseline: "each other site once", "\(siteCount - 1)", ratio: String(format: "%.3f", ratio / Double(max(1, siteCount - 1))),
            target: "= \(siteCount - 1), nothing back", met: returned == 0 && loops == 0 && known == total
                && abs(ratio - Double(siteCount - 1)) < 0.02)
}
