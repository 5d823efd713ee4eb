import Foundation
import Testing
import ZeroMQ
@testable import Handoff
import HandoffTestSupport

/// A broker without its cache (`handoff broker --no-cache`): what it asks its publishers for, over
/// real sockets, open and over CURVE (the rules themselves: ForwardedInterestTests).
@Suite("Broker without its cache: one subscription per prefix at the publishers", .exclusive)
struct BrokerWithoutCacheTests {
    /// Before, each subscription went on as it came: the frontend's XSUB counted two, libzmq's
    /// backend passed only the last withdrawal, and the prefix stood at the publishers for good.
    @Test("without the cache, two subscribers of a prefix make one subscription at the publishers, withdrawn when the second leaves")
    func withoutTheCacheOneSubscriptionPerPrefix() async throws {
        let context = try Context()
        let broker = try Broker.start(.ephemeral(lastValueCache: false), context: context)
        let publisher = try await connectPublisher(to: broker, context: context)
        // Verbose, as a node's publisher is: duplicates reach it (before, both subscriptions did).
        try publisher.set(.xpubVerbose, true)
        let subscribers = try (0..<2).map { _ in
            let subscriber = try context.socket(.sub)
            try subscriber.subscribe("A:org.two.")
            try subscriber.connect(broker.backendEndpoint)
            return subscriber
        }
        // Probes until each has one (the second may hear the probes sent while waiting for the first).
        var reached = [false, false]
        let deadline = ContinuousClock.now + .seconds(5)
        while reached.contains(false), ContinuousClock.now < deadline {
            try await publish(.presence(node: "probe", topic: "A:org.two.probe"), on: publisher)
            for (index, subscriber) in subscribers.enumerated() where try await receiveMessage(subscriber, timeout: .milliseconds(20)) != nil {
                reached[index] = true
            }
        }
        #expect(reached == [true, true])
        try await waitUntil(within: .seconds(5)) { broker.counters.subscriptions >= 2 }
        var heard: [[UInt8]] = []
        while let frames = try await receiveMessage(publisher, timeout: .milliseconds(300)) { heard.append(frames[0].bytes) }
        #expect(heard.filter { $0 == subscription("A:org.two.") }.count == 1, "\(heard.map { String(decoding: $0, as: UTF8.self) })")
        subscribers[0].close()
        #expect(try await !receiveUntil(publisher, within: .milliseconds(500)) { $0.bytes == unsubscription("A:org.two.") })
        subscribers[1].close()
        #expect(try await receiveUntil(publisher, within: .seconds(5)) { $0.bytes == unsubscription("A:org.two.") })
        await broker.stop()
    }

    /// On a secure broker each subscription reaches the broker with its subscriber's key; a keyed
    /// withdrawal takes only that key off, since libzmq passes one up also from a subscriber that
    /// never held the topic.
    @Test("over CURVE: two members' subscribers make one subscription at the publishers, withdrawn when libzmq passes its own withdrawal as the last connection goes; withdrawn one by one (libzmq passes only the last, with its key) it stands")
    func withoutTheCacheSecure() async throws {
        let account = try TestAccount()
        var configuration = Broker.Configuration(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*", lastValueCache: false)
        configuration.security = Security(keyPair: account.broker, authorizedKeys: account.members)
        let context = try Context()
        let broker = try Broker.start(configuration, context: context)
        let publisher = try await connectPublisher(to: broker, context: context, secure: (account.security(account.a), account.broker.publicKey))
        try publisher.set(.xpubVerbose, true)
        func subscriber(_ keys: CurveKeyPair, _ topic: String) throws -> Socket {
            let socket = try context.socket(.sub)
            try account.security(keys).secureClient(socket, serverKey: account.broker.publicKey)
            try socket.subscribe(topic)
            try socket.connect(broker.backendEndpoint)
            return socket
        }
        // Both connections go: libzmq's withdrawal (no key) as the last one does.
        let (a, b) = (try subscriber(account.a, "A:org.gone."), try subscriber(account.b, "A:org.gone."))
        #expect(try await receiveUntil(publisher, within: .seconds(5)) { $0.bytes == subscription("A:org.gone.") })
        try await waitUntil(within: .seconds(5)) { broker.counters.subscriptions >= 2 }
        a.close()
        #expect(try await !receiveUntil(publisher, within: .milliseconds(500)) { $0.bytes == unsubscription("A:org.gone.") })
        b.close()
        #expect(try await receiveUntil(publisher, within: .seconds(5)) { $0.bytes == unsubscription("A:org.gone.") })
        // Both withdraw, one by one, connected: libzmq passes the last withdrawal, with its key,
        // which the broker cannot tell from a member's of what it never held: the prefix stands.
        let (c, d) = (try subscriber(account.a, "A:org.kept."), try subscriber(account.b, "A:org.kept."))
        #expect(try await receiveUntil(publisher, within: .seconds(5)) { $0.bytes == subscription("A:org.kept.") })
        try await waitUntil(within: .seconds(5)) { broker.counters.subscriptions >= 4 }
        let withdrawn = broker.counters.unsubscriptions
        try c.unsubscribe("A:org.kept.")
        try d.unsubscribe("A:org.kept.")
        try await waitUntil(within: .seconds(5)) { broker.counters.unsubscriptions > withdrawn }
        #expect(try await !receiveUntil(publisher, within: .milliseconds(500)) { $0.bytes == unsubscription("A:org.kept.") })
        c.close()
        d.close()
        await broker.stop()
    }
}
