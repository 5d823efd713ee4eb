import Foundation
import Handoff
import Testing
import ZeroMQ

/// libzmq keeps every distinct subscription a connection made until it goes, at about 30 bytes of
/// memory per byte of topic: a socket that takes only subscriptions cuts off a peer whose frame is
/// over ``WireLimits/maxSubscriptionFrame`` before anything is kept (without the limit, 500
/// subscriptions of 60,000 bytes took a broker from 35 to 951 MiB).
@Suite("Subscriptions: a frame past the contract's longest costs its sender the connection")
struct SubscriptionLimitTests {
    /// A subscription frame (the flag byte, then the topic) of exactly `length` bytes.
    static func subscription(length: Int) -> [UInt8] {
        let topic = Array("A:org.example.".utf8)
        return [1] + topic + [UInt8](repeating: UInt8(ascii: "x"), count: length - 1 - topic.count)
    }

    /// An XSUB connected to `endpoint` that sends `frame`, and whether it was disconnected within
    /// `patience` (a receiver cuts off at the frame's header, within milliseconds).
    static func isCutOff(sending frame: [UInt8], to endpoint: String, context: Context, patience: Duration = .seconds(5)) async throws -> Bool {
        let peer = try context.socket(.xsub)
        defer { peer.close() }
        try peer.set(.linger, 0)
        let monitor = try peer.monitor([.connected, .disconnected])
        defer { monitor.stop() }
        try peer.connect(endpoint)
        #expect(try await monitor.next(matching: .connected, timeout: .seconds(5)) != nil)
        try await peer.send(frame)
        return try await monitor.next(matching: .disconnected, timeout: patience) != nil
    }

    @Test("a broker's backend cuts off a subscriber whose subscription is over 1 KiB, and takes one of exactly 1 KiB; a publisher's messages still reach an honest subscriber")
    func brokerBackend() async throws {
        let context = try Context()
        try await Broker.withRunning(.ephemeral(), context: context) { broker in
            let publisher = try await connectPublisher(to: broker, context: context)
            let honest = try context.socket(.sub)
            try honest.subscribe("P:")
            try honest.connect(broker.backendEndpoint)
            try await awaitDelivery(from: publisher, to: honest, probe: .presence(node: "probe"))
            let before = broker.counters.subscriptions

            let over = Self.subscription(length: WireLimits.maxSubscriptionFrame + 1)
            #expect(try await Self.isCutOff(sending: over, to: broker.backendEndpoint, context: context), "the broker kept a subscriber of \(over.count) bytes")
            #expect(broker.counters.subscriptions == before, "libzmq passed up a subscription it should have refused")

            let longest = Self.subscription(length: WireLimits.maxSubscriptionFrame)
            #expect(try await !Self.isCutOff(sending: longest, to: broker.backendEndpoint, context: context, patience: .seconds(1)), "the broker cut off a subscription within the limit")
            try await waitUntil(within: .seconds(5)) { broker.counters.subscriptions == before + 1 }

            try await awaitDelivery(from: publisher, to: honest, probe: .presence(node: "after"))
        }
    }

    @Test("a node's publisher (direct mode) cuts off a peer whose subscription is over 1 KiB; its presence still reaches an honest peer")
    func nodePublisher() async throws {
        try await Node.withRunning(testConfiguration("lone")) { node in
            let endpoint = try #require(node.busEndpoint)
            let context = try Context()
            let over = Self.subscription(length: WireLimits.maxSubscriptionFrame + 1)
            #expect(try await Self.isCutOff(sending: over, to: endpoint, context: context), "the node kept a subscriber of \(over.count) bytes")
            let longest = Self.subscription(length: WireLimits.maxSubscriptionFrame)
            #expect(try await !Self.isCutOff(sending: longest, to: endpoint, context: context, patience: .seconds(1)), "the node cut off a subscription within the limit")

            let honest = try context.socket(.sub)
            defer { honest.close() }
            try honest.subscribe("P:")
            try honest.connect(endpoint)
            #expect(try await receiveMessage(honest, timeout: .seconds(5)) != nil, "the node published no presence after the hostile peer")
        }
    }

    @Test("the contract's longest subscriptions fit under the limit with room to spare")
    func contractsLongestFit() {
        // "L:" + site (64) + "|" + "A:" + type (255), the longest; "X:" + node id + "/" + trace id
        // + "/" + activity id; "S:" + trace id + "/" + type prefix. Each with its flag byte.
        let site = 1 + 2 + 64 + 1 + 2 + WireLimits.maxActivityType
        let trace = 1 + 2 + WireLimits.maxNodeID + 1 + 32 + 1 + WireLimits.maxActivityID
        let snapshot = 1 + 2 + 32 + 1 + WireLimits.maxActivityType
        #expect([site, trace, snapshot].allSatisfy { $0 * 3 <= WireLimits.maxSubscriptionFrame }, "\([site, trace, snapshot])")
    }
}
