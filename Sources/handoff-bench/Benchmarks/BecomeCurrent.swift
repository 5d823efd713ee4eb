import CPeerBaselines
import CRawBaselines
import Foundation
import Handoff
import ZeroMQ

/// What `becomeCurrent` costs on an idle node with no subscriber, called from a task off the main
/// actor: the API's own share of an advertisement.
func benchBecomeCurrent(count n: Int) async throws {
    let node = try Node(configuration: Node.Configuration(name: "m", bus: .direct(listen: "tcp://127.0.0.1:*", peers: []), subscriptions: []))
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await node.run() }
        await node.untilRunning()
        let started = ContinuousClock.now
        for index in 0..<n {
            let activity = try UserActivity(activityType: "org.handoff.bench.advert")
            activity.title = "advert \(index)"
            try await activity.becomeCurrent(on: node)
        }
        let each = seconds(ContinuousClock.now - started) / Double(n) * 1e6
        print("becomeCurrent on an idle node, \(n) activities one after another")
        row("Handoff becomeCurrent", String(format: "%.1f µs", each), String(format: "%.0f per second", 1e6 / each))
        // A batch in one call is one job on the node's loop until it returns (nothing in it waits):
        // how long it takes is how long it holds that loop from every other task there.
        let batch = try (0..<n).map { index in
            let activity = try UserActivity(activityType: "org.handoff.bench.batch")
            activity.title = "batch \(index)"
            return activity
        }
        let batchStarted = ContinuousClock.now
        try await node.becomeCurrent(batch)
        let held = seconds(ContinuousClock.now - batchStarted) * 1e3
        row("Handoff becomeCurrent(\(n) at once): loop held", String(format: "%.1f ms", held), String(format: "%.2f µs each", held * 1e3 / Double(n)))
        group.cancelAll()
    }
}
