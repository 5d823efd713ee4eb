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
        group.cancelAll()
    }
}
