import Foundation
import Handoff

/// `fleet-watcher`: a node on the broker at `--frontend`/`--backend` (and the pair's second at
/// `--second-frontend`/`--second-backend`) that follows every `org.fleet.`
/// activity; says READY when running, KNOWN once it knows `--expect` of them, and COUNT with how
/// many it knows when its standard input closes.
func runFleetWatcher(_ arguments: [String]) async throws {
    guard let frontend = stringOption("--frontend", in: arguments), let backend = stringOption("--backend", in: arguments) else {
        throw HandoffError(.invalidConfiguration, "fleet-watcher needs --frontend and --backend")
    }
    let expect = intOption("--expect", 0, in: arguments)
    var brokers = [Node.Configuration.BrokerEndpoints(frontend: frontend, backend: backend)]
    if let second = stringOption("--second-frontend", in: arguments), let secondBackend = stringOption("--second-backend", in: arguments) {
        brokers.append(.init(frontend: second, backend: secondBackend))
    }
    var configuration = Node.Configuration(name: "fleet-watcher", bus: brokers.count == 1 ? .broker(frontend: frontend, backend: backend) : .brokers(brokers))
    configuration.subscriptions = ["org.fleet."]
    configuration.maxKnownActivities = max(configuration.maxKnownActivities, expect)
    try await Node.withRunning(configuration) { node in
        tell("READY")
        while await node.activities().count < expect { try await Task.sleep(for: .milliseconds(20)) }
        tell("KNOWN")
        await untilStandardInputCloses()
        tell("COUNT \(await node.activities().count)")
    }
}
