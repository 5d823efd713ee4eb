import Foundation
import HandoffTestSupport
import Testing

/// deploy/monitoring: the Grafana dashboard, the Prometheus alert rules (and their unit tests),
/// the example Prometheus configuration.
enum MonitoringFiles {
    static let folder = repositoryRoot.appendingPathComponent("deploy/monitoring")

    /// Every PromQL expression of the dashboard's panels, with Grafana's variables given values.
    static func dashboardQueries() throws -> [String] {
        let data = try Data(contentsOf: folder.appendingPathComponent("handoff-dashboard.json"))
        let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        return panels.flatMap { ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String } }.map {
            $0.replacingOccurrences(of: "$__rate_interval", with: "5m")
                .replacingOccurrences(of: "$broker_job", with: "handoff-broker")
                .replacingOccurrences(of: "$agent_job", with: "handoff-agent")
                .replacingOccurrences(of: "$instance", with: ".*")
        }
    }

    /// The metric families the dashboard and the alert rules query (a histogram's `_bucket` is its
    /// family's).
    static func queriedFamilies() throws -> Set<String> {
        let rules = try String(contentsOf: folder.appendingPathComponent("handoff-alerts.yml"), encoding: .utf8)
        let text = try dashboardQueries().joined(separator: "\n") + "\n" + rules
        let names = text.matches(of: /\b(?:handoff|process)_[a-z_]+/).map { String($0.output) }
        return Set(names.map { $0.hasSuffix("_bucket") ? String($0.dropLast("_bucket".count)) : $0 })
    }
}

@Suite("Monitoring: the Grafana dashboard and the alert rules", .exclusive)
struct MonitoringTests {
    static let required = promtool != nil || promtoolRequired

    @Test("promtool checks the alert rules and passes their unit tests: each alert fires on its series, at its time, with its words, and not before",
          .enabled(if: required, "promtool is not installed (Debian's prometheus package)"))
    func alertRules() throws {
        let checked = try runPromtool(["check", "rules", "handoff-alerts.yml"], in: MonitoringFiles.folder)
        #expect(checked.status == 0, "\(checked.output)")
        #expect(checked.output.contains("SUCCESS: 9 rules found"), "\(checked.output)")
        let tested = try runPromtool(["test", "rules", "handoff-alerts.test.yml"], in: MonitoringFiles.folder)
        #expect(tested.status == 0, "\(tested.output)")
    }

    @Test("the example Prometheus configuration is valid and loads the rules",
          .enabled(if: required, "promtool is not installed (Debian's prometheus package)"))
    func prometheusConfiguration() throws {
        let checked = try runPromtool(["check", "config", "prometheus.yml"], in: MonitoringFiles.folder)
        #expect(checked.status == 0, "\(checked.output)")
    }

    @Test("every panel of the dashboard is valid PromQL (promtool parses each query as a recording rule)",
          .enabled(if: required, "promtool is not installed (Debian's prometheus package)"))
    func dashboardQueriesParse() throws {
        let queries = try MonitoringFiles.dashboardQueries()
        #expect(queries.count >= 25)
        var rules = "groups:\n  - name: dashboard\n    rules:\n"
        for (index, query) in queries.enumerated() {
            let quoted = query.replacingOccurrences(of: "'", with: "''")
            rules += "      - record: handoff:dashboard_query_\(index)\n        expr: '\(quoted)'\n"
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("dashboard-\(UUID().uuidString).yml")
        try rules.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let checked = try runPromtool(["check", "rules", file.path])
        #expect(checked.status == 0, "\(checked.output)")
        #expect(checked.output.contains("SUCCESS: \(queries.count) rules found"), "\(checked.output)")
    }
}
