import Foundation
import HandoffWire
import Testing
import ZeroMQ
@testable import Handoff
import HandoffTestSupport

/// A node that follows many type prefixes: libzmq sends a SUB's subscriptions through its send
/// queue, each as it is made and all again when the connection comes back, and drops what does
/// not fit, with no error to the caller. And it asks for their snapshots a few at a time
/// (``Follower/maxSnapshotsUnderWay``): asked all at once, the broker answered 64 and replied busy
/// to the rest, which were asked again up to five times each, and the node, busy with thousands
/// of those (its presence a second late), once heard none of the advertisements after a restart
/// within 10 s (the project's CI, parallel pass of 10cab5c).
@Suite("A node following many prefixes", .exclusive)
struct ManySubscriptionsTests {
    @Test("a node following 1,500 type prefixes hears each, from the start and after its broker restarts")
    func everyPrefixHeard() async throws {
        let context = try Context()
        var broker = try Broker.start(.ephemeral(), context: context)
        let (frontend, backend) = (broker.frontendEndpoint, broker.backendEndpoint)
        let prefixes = 1_500
        var configuration = nodeOnBroker("many", broker: broker, security: nil)
        configuration.subscriptions = (0..<prefixes).map { "org.many.t\($0)." }
        try await withNodes([configuration]) { nodes in
            let node = nodes[0]
            /// Advertises one activity of each prefix at the broker, each of its own origin (the
            /// broker forwards at most 1,000 of one), and returns the prefixes the node never heard.
            func unheard(_ round: String) async throws -> [Int] {
                let publisher = try await connectPublisher(to: broker, context: context)
                defer { publisher.close() }
                for index in 0..<prefixes {
                    var origin = BusMessage.node
                    origin.nodeID = "\(round)-node-\(index)"
                    try await publish(.advertisement(id: "\(round)-\(index)", type: "org.many.t\(index).edit", origin: origin), on: publisher)
                }
                let wanted = Set((0..<prefixes).map { "\(round)-\($0)" })
                var known = Set<String>()
                let deadline = WaitDeadline(.seconds(30))
                while !deadline.passed {
                    known = Set(await node.activities().map(\.id)).intersection(wanted)
                    if known.count == prefixes { break }
                    try await Task.sleep(for: .milliseconds(100))
                }
                return (0..<prefixes).filter { !known.contains("\(round)-\($0)") }
            }
            // The node subscribed before the broker's first subscriber connected: give its
            // subscriptions a moment to arrive (a slow joiner misses what comes before them).
            try await waitUntil(within: .seconds(10)) { broker.counters.subscriptions >= prefixes }
            #expect(await node.untilSynchronized(timeout: .seconds(20)), "every snapshot answered in full")
            #expect(broker.counters.snapshotsBusy == 0, "no request past what the broker answers at once")
            let first = try await unheard("first")
            let stateFirst = await Self.state(of: node, broker: broker)
            #expect(first.isEmpty, "\(first.count) prefixes unheard, \(first.prefix(10))…; \(stateFirst)")

            await broker.stop()
            broker = try await SitesTests.restart(frontend: frontend, backend: backend, context: context)
            try await waitUntil(within: .seconds(10)) { broker.counters.subscriptions >= prefixes }
            #expect(await node.untilSynchronized(timeout: .seconds(20)), "every snapshot answered in full")
            #expect(broker.counters.snapshotsBusy == 0)
            let again = try await unheard("again")
            let stateAgain = await Self.state(of: node, broker: broker)
            #expect(again.isEmpty, "\(again.count) prefixes unheard after the broker restarted, \(again.prefix(10))…; \(stateAgain)")
        }
        await broker.stop()
    }

    /// What the node and the broker say of themselves, for a failure's message: where the
    /// messages went (the broker's counts), what the node ignored, and whether it is on the bus.
    static func state(of node: Node, broker: Broker) async -> String {
        "broker: \(broker.counters); node: \(await node.securityCounters), \(await node.busHealth)"
    }
}
