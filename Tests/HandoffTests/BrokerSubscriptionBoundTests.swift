import Foundation
import Testing
import ZeroMQ
@testable import Handoff
import HandoffTestSupport

/// The bound on what a subscriber's connection holds at a real broker (``SubscriptionLedger``
/// tests the rule itself): real libzmq sockets, as a member flooding the backend would use them.
@Suite("Broker subscription bounds", .exclusive)
struct BrokerSubscriptionBoundTests {
    private static func broker(context: Context, capture: Bool = false) throws -> Broker {
        var configuration = Broker.Configuration.ephemeral()
        configuration.subscriptionBounds = .init(perConnection: 100, bytesPerConnection: 4_096)
        if capture { configuration.capture = "tcp://127.0.0.1:*" }
        return try Broker.start(configuration, context: context)
    }

    /// The broker's sockets that subscribers connect to.
    enum SubscribedSocket: String, CaseIterable, CustomTestStringConvertible {
        case backend
        /// The capture (`--capture`), whose subscribers are operators' monitors.
        case capture
        var testDescription: String { rawValue }
    }

    @Test("a subscriber whose distinct subscriptions go past its connection's bound is cut off and counted; a subscriber beside it keeps receiving (at the backend, and at the capture alike)",
          arguments: SubscribedSocket.allCases)
    func floodIsCut(at socket: SubscribedSocket) async throws {
        let context = try Context()
        let broker = try Self.broker(context: context, capture: socket == .capture)
        let endpoint = try #require(socket == .capture ? broker.captureEndpoint : broker.backendEndpoint)
        let publisher = try await connectPublisher(to: broker, context: context)
        let honest = try context.socket(.sub)
        try honest.subscribe("A:")
        try honest.connect(endpoint)
        try await awaitDelivery(from: publisher, to: honest, probe: .presence(node: "probe", topic: "A:probe"))

        let flooder = try context.socket(.sub)
        // It stays away once cut (by default libzmq reconnects within 100 ms, and a SUB sends
        // every subscription it holds again, to be cut again).
        try flooder.set(.reconnectInterval, Int32(60_000))
        let monitor = try flooder.monitor([.disconnected])
        try flooder.connect(endpoint)
        for index in 0..<1_000 { try flooder.subscribe("A:flood.\(index)") }

        try await waitUntil(within: .seconds(10)) { broker.counters.subscribersCut >= 1 }
        let disconnected = try await monitor.next(matching: .disconnected, timeout: .seconds(5))
        #expect(disconnected != nil, "the flooder's connection was not cut")
        #expect(broker.counters.subscribersCut == 1)

        let flooded = try BusMessage.advertisement(id: "after", type: "flood.5")
        try await publish(flooded, on: publisher)
        #expect(try await receiveUntil(honest, within: .seconds(5)) { $0.bytes == flooded.topic })
        #expect(try await receiveUntil(flooder, within: .milliseconds(300)) { _ in true } == false)
        monitor.stop()
        await broker.stop()
    }

    @Test("a subscriber that subscribes and withdraws far more topics than the bound, a few at a time, is never cut")
    func withdrawalsFreeRoom() async throws {
        let context = try Context()
        let broker = try Self.broker(context: context)
        let publisher = try await connectPublisher(to: broker, context: context)
        let subscriber = try context.socket(.sub)
        // (Past its send queue, 1,000 by default, a SUB drops the (un)subscriptions it sends.)
        try subscriber.set(.sendHighWaterMark, Int32(0))
        try subscriber.subscribe("A:kept")
        try subscriber.connect(broker.backendEndpoint)
        try await awaitDelivery(from: publisher, to: subscriber, probe: .presence(node: "probe", topic: "A:kept.probe"))
        let before = broker.counters.unsubscriptions
        for index in 0..<1_000 {
            try subscriber.subscribe("A:watch.\(index)")
            if index >= 10 { try subscriber.unsubscribe("A:watch.\(index - 10)") }
        }
        try await waitUntil(within: .seconds(10)) { broker.counters.unsubscriptions - before >= 990 }
        #expect(broker.counters.subscribersCut == 0)
        let kept = try BusMessage.advertisement(id: "kept", type: "kept.1")
        try await publish(kept, on: publisher)
        #expect(try await receiveUntil(subscriber, within: .seconds(5)) { $0.bytes == kept.topic })
        await broker.stop()
    }

    @Test("topics past the connection's bytes of topic cut it, though few")
    func longTopicsAreCut() async throws {
        let context = try Context()
        let broker = try Self.broker(context: context)
        let flooder = try context.socket(.sub)
        try flooder.set(.reconnectInterval, Int32(60_000))
        try flooder.connect(broker.backendEndpoint)
        for index in 0..<10 { try flooder.subscribe("A:" + String(repeating: "x", count: 1_000) + "\(index)") }
        try await waitUntil(within: .seconds(10)) { broker.counters.subscribersCut == 1 }
        await broker.stop()
    }

    @Test("a node's publisher (direct mode) cuts off a peer whose subscriptions go past a broker's default bound; another peer still hears the node")
    func nodePublisherFloodIsCut() async throws {
        try await withNodes([testConfiguration("flooded")]) { nodes in
            let node = nodes[0]
            let endpoint = try #require(node.busEndpoint)
            // libzmq takes a peer's subscriptions into its trie ahead of the node by this many.
            #expect(try await node.publisherReceiveHighWaterMark() == Node.publisherSubscriptionQueue)
            let context = try Context()
            let flooder = try context.socket(.sub)
            try flooder.set(.reconnectInterval, Int32(60_000))
            try flooder.set(.sendHighWaterMark, Int32(0))
            try flooder.connect(endpoint)
            let flood = Broker.SubscriptionBounds().perConnection + 1_000
            for index in 0..<flood { try flooder.subscribe("A:flood.\(index)") }
            #expect(await eventually(within: .seconds(20)) { await node.securityCounters.subscribersCut == 1 })

            let honest = try context.socket(.sub)
            try honest.subscribe("A:org.bounds.")
            try honest.connect(endpoint)
            // (A slow joiner: what the node advertises before the peer's subscription reached it
            // goes to nobody, so a new activity each try until one is heard.)
            var heard = false
            for _ in 0..<20 where !heard {
                try await UserActivity(activityType: "org.bounds.edit").becomeCurrent(on: node)
                heard = try await receiveUntil(honest, within: .milliseconds(250)) { $0.string == "A:org.bounds.edit" }
            }
            #expect(heard, "the honest peer never heard the node")
            #expect(try await receiveUntil(flooder, within: .milliseconds(300)) { _ in true } == false)
            #expect(await node.securityCounters.subscribersCut == 1)
        }
    }
}

extension Node {
    /// The publisher's receive high-water mark, read on the node (its sockets are its own).
    fileprivate func publisherReceiveHighWaterMark() throws -> Int32 { try sockets.publisher.get(.receiveHighWaterMark) }
}
