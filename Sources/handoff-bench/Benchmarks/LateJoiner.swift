import CPeerBaselines
import CRawBaselines
import Foundation
import Handoff
import ZeroMQ

/// A late joiner's time to see `count` current activities (from the broker's cache).
func benchLateJoiner(count: Int) async throws {
    let context = try Context()
    let broker = try Broker.start(benchBrokerConfiguration(), context: context)
    let publisher = try Node(configuration: brokerNodeConfiguration("publisher", broker: broker), context: context)
    let elapsed: Double = try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await publisher.run() }
        defer { group.cancelAll() }
        await publisher.untilRunning()
        for index in 0..<count {
            let activity = try UserActivity(activityType: "org.handoff.bench.current")
            activity.title = "current \(index)"
            try await activity.becomeCurrent(on: publisher)
        }
        while broker.counters.cachedActivities < count { try await Task.sleep(for: .milliseconds(5)) }
        let started = ContinuousClock.now
        return try await Node.withRunning(brokerNodeConfiguration("late", broker: broker), context: context) { node in
            while await node.activities().count < count { try await Task.sleep(for: .milliseconds(1)) }
            return seconds(ContinuousClock.now - started)
        }
    }
    await broker.stop()
    print("Late joiner: time for a new node to see \(count) current activities (broker cache, no re-advertisement)")
    row("Handoff late joiner", String(format: "%.1f ms", elapsed * 1000))
    let period = Node.Configuration(name: "x", bus: .direct(listen: "tcp://127.0.0.1:*", peers: [])).advertiseInterval
    compare("late joiner sees \(count) activities", handoff: String(format: "%.1f ms", elapsed * 1000), baseline: "waiting for re-advertisement",
            "\(period) (default period)", ratio: String(format: "%.3f of a period", elapsed / seconds(period)),
            target: "at once", met: elapsed < seconds(period) / 10)
}
