import Foundation
import Glibc
import Handoff
import Testing
import HandoffTestSupport

/// Where the Prometheus server (Debian's `prometheus`) is, if it is installed.
let prometheusServer = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"].first { FileManager.default.isExecutableFile(atPath: $0) }

@Suite("A real Prometheus server scrapes a broker and two agents", .exclusive, .serialized)
struct PrometheusTests {
    /// A PromQL query (or any API path) over Prometheus' HTTP API: its `data`.
    func api(_ port: Int, _ path: String, query: String? = nil) throws -> Any? {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let full = query.map { path + "?query=" + ($0.addingPercentEncoding(withAllowedCharacters: allowed) ?? $0) } ?? path
        let answer = try httpGet(port: port, path: full)
        guard answer.status == 200,
              let object = try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any],
              object["status"] as? String == "success" else {
            throw ProcessFailure("Prometheus \(full): \(answer.status) \(answer.body.prefix(500))")
        }
        return object["data"]
    }

    @Test("with the deploy/ alert rules loaded, every target up, every dashboard query valid, and every metric family the dashboard and rules use has series after the contacts story",
          .enabled(if: prometheusServer != nil || promtoolRequired, "prometheus is not installed (apt-get install prometheus); scripts/test and CI install and require it"))
    func scrapeWithRealPrometheus() async throws {
        let server = try #require(prometheusServer, "prometheus is not installed (apt-get install prometheus), and this run requires it")
        let prometheusPort = Int(try freePort().split(separator: ":").last!)!
        let deployment = try await ServedDeployment.start(agents: ["origin", "continuer"])
        defer { deployment.stop() }
        let folder = deployment.folder
        let (brokerPort, originPort, continuerPort) = (deployment.brokerPort, deployment.agent("origin").port, deployment.agent("continuer").port)

        // deploy/monitoring's configuration, with these targets and a scrape a second.
        try FileManager.default.copyItem(
            at: MonitoringFiles.folder.appendingPathComponent("handoff-alerts.yml"), to: folder.appendingPathComponent("handoff-alerts.yml"))
        let configuration = try String(contentsOf: MonitoringFiles.folder.appendingPathComponent("prometheus.yml"), encoding: .utf8)
            .replacingOccurrences(of: "15s", with: "1s")
            .replacingOccurrences(of: #"["127.0.0.1:9464"]"#, with: #"["127.0.0.1:\#(brokerPort)"]"#)
            .replacingOccurrences(of: #"["127.0.0.1:9465", "127.0.0.1:9466"]"#, with: #"["127.0.0.1:\#(originPort)", "127.0.0.1:\#(continuerPort)"]"#)
        #expect(configuration.contains("\(continuerPort)"), "deploy/monitoring/prometheus.yml's targets changed: \(configuration)")
        try configuration.write(to: folder.appendingPathComponent("prometheus.yml"), atomically: true, encoding: .utf8)
        // Watched: a run killed mid-test leaves no Prometheus holding its port and database.
        let prometheus = Process.watched(URL(fileURLWithPath: server), [
            "--config.file=\(folder.appendingPathComponent("prometheus.yml").path)",
            "--storage.tsdb.path=\(folder.appendingPathComponent("data").path)",
            "--web.listen-address=127.0.0.1:\(prometheusPort)", "--log.level=warn",
        ])
        let prometheusLog = folder.appendingPathComponent("prometheus.log")
        _ = FileManager.default.createFile(atPath: prometheusLog.path, contents: nil)
        prometheus.standardOutput = FileHandle.nullDevice
        prometheus.standardError = try FileHandle(forWritingTo: prometheusLog)
        try prometheus.spawn()
        defer { reap(prometheus) }
        func log() -> String { (try? String(contentsOf: prometheusLog, encoding: .utf8)) ?? "" }
        #expect(await eventually(within: .seconds(20)) { ((try? httpGet(port: prometheusPort, path: "/-/ready"))?.status ?? 0) == 200 },
                "Prometheus never became ready: \(log())")

        // The contacts story, so that continue latency and streams have samples.
        try await deployment.shareContacts(["Ada"], on: "origin")
        let continued = try await runHandoff(["continue", "--type", "org.handoff.contacts.list-contacts", "--agent", deployment.agent("continuer").control])
        #expect(continued.status == 0, "\(continued.error)")

        // Every target up.
        #expect(await eventually(within: .seconds(15)) {
            guard let data = try? api(prometheusPort, "/api/v1/query", query: "up") as? [String: Any],
                  let result = data["result"] as? [[String: Any]] else { return false }
            let up = result.filter { (($0["value"] as? [Any])?.last as? String) == "1" }
            return up.count == 3
        }, "not every target up: \((try? api(prometheusPort, "/api/v1/targets")) ?? "") \(log())")

        // The alert rules loaded, and none fires on a healthy deployment.
        let rules = try #require(try api(prometheusPort, "/api/v1/rules") as? [String: Any])
        let groups = rules["groups"] as? [[String: Any]] ?? []
        let loaded = groups.flatMap { $0["rules"] as? [[String: Any]] ?? [] }
        #expect(loaded.count >= 8, "\(groups)")
        let alerts = try #require(try api(prometheusPort, "/api/v1/alerts") as? [String: Any])
        let firing = (alerts["alerts"] as? [[String: Any]] ?? []).filter { $0["state"] as? String == "firing" }
        #expect(firing.isEmpty, "\(firing)")

        // Each family the dashboard and the rules use has series, scraped from the right job.
        let families = try MonitoringFiles.queriedFamilies()
        var missing: [String] = []
        let found = await eventually(within: .seconds(20)) {
            missing = families.sorted().filter { family in
                let series = (try? api(prometheusPort, "/api/v1/query", query: "count({__name__=~\"\(family)(_bucket|_count|_sum)?\"})") as? [String: Any])?["result"] as? [[String: Any]]
                return series?.isEmpty ?? true
            }
            return missing.isEmpty
        }
        #expect(found, "no series in Prometheus for: \(missing)")
        // Every dashboard query is valid PromQL to the server itself (and the traffic ones have data).
        for query in try MonitoringFiles.dashboardQueries() {
            #expect(throws: Never.self, "\(query)") { _ = try api(prometheusPort, "/api/v1/query", query: query) }
        }
        let brokerIn = try api(prometheusPort, "/api/v1/query", query: #"sum(handoff_broker_messages_total{job="handoff-broker",direction="in"})"#) as? [String: Any]
        #expect(((brokerIn?["result"] as? [[String: Any]])?.first?["value"] as? [Any])?.last as? String != "0", "\(brokerIn ?? [:])")
    }
}
