import Testing
@testable import Handoff

/// The broker's bound on what a subscriber's connection holds (``SubscriptionLedger``), without
/// sockets: connections are descriptors and peers, as the broker loop hands them over.
@Suite("Subscription ledger")
struct SubscriptionLedgerTests {
    private static let bounds = Broker.SubscriptionBounds(perConnection: 3, bytesPerConnection: 40, perKey: 5, bytesPerKey: 1_000)
    private static let alice: [UInt8] = Array(repeating: 1, count: 32)

    private func subscribe(_ ledger: inout SubscriptionLedger<String>, _ topic: String, on descriptor: Int32 = 7, peer: String = "a", key: [UInt8]? = nil) -> SubscriptionLedger<String>.Verdict {
        Array(topic.utf8).withUnsafeBytes { ledger.subscribed($0, descriptor: descriptor, peer: peer, key: key) }
    }

    private func unsubscribe(_ ledger: inout SubscriptionLedger<String>, _ topic: String, on descriptor: Int32 = 7, peer: String = "a") {
        Array(topic.utf8).withUnsafeBytes { ledger.unsubscribed($0, descriptor: descriptor, peer: peer) }
    }

    @Test("a connection holds each distinct topic once; the subscription past its count is cut, and what it sends after is refused")
    func countBound() {
        var ledger = SubscriptionLedger<String>(bounds: Self.bounds)
        for topic in ["A:x", "A:y", "A:x", "P:", "A:y"] { #expect(subscribe(&ledger, topic) == .within) }
        #expect(ledger.held(descriptor: 7) == .init(subscriptions: 3, bytes: 8))
        #expect(subscribe(&ledger, "A:z") == .cut(held: .init(subscriptions: 4, bytes: 11), overKey: false))
        #expect(ledger.held(descriptor: 7) == .init())
        #expect(subscribe(&ledger, "A:w") == .refused)
        #expect(subscribe(&ledger, "A:x") == .refused)
        // Another connection is not touched.
        #expect(subscribe(&ledger, "A:z", on: 8, peer: "b") == .within)
    }

    @Test("the subscription past a connection's bytes of topic is cut, however few it holds")
    func byteBound() {
        var ledger = SubscriptionLedger<String>(bounds: Self.bounds)
        #expect(subscribe(&ledger, String(repeating: "a", count: 40)) == .within)
        #expect(subscribe(&ledger, "b") == .cut(held: .init(subscriptions: 2, bytes: 41), overKey: false))
    }

    @Test("a withdrawal frees its topic's room; one for a topic the connection never held (libzmq passes those up too) frees nothing")
    func withdrawals() {
        var ledger = SubscriptionLedger<String>(bounds: Self.bounds)
        for topic in ["A:x", "A:y", "A:z"] { #expect(subscribe(&ledger, topic) == .within) }
        // Held by another connection only: this connection's count stays.
        #expect(subscribe(&ledger, "A:q", on: 8, peer: "b") == .within)
        unsubscribe(&ledger, "A:q")
        unsubscribe(&ledger, "A:never")
        #expect(ledger.held(descriptor: 7).subscriptions == 3)
        #expect(subscribe(&ledger, "A:w").isCut)

        var fresh = SubscriptionLedger<String>(bounds: Self.bounds)
        for round in 0..<100 {
            #expect(subscribe(&fresh, "A:t\(round)") == .within)
            unsubscribe(&fresh, "A:t\(round)")
        }
        #expect(fresh.held(descriptor: 7) == .init())
    }

    @Test("a descriptor handed to a new peer starts afresh; the old connection's withdrawals no longer count")
    func descriptorReused() {
        var ledger = SubscriptionLedger<String>(bounds: Self.bounds)
        for topic in ["A:x", "A:y", "A:z"] { #expect(subscribe(&ledger, topic, key: Self.alice) == .within) }
        #expect(subscribe(&ledger, "A:x", peer: "a2", key: Self.alice) == .within)
        #expect(ledger.held(descriptor: 7) == .init(subscriptions: 1, bytes: 3))
        #expect(ledger.held(key: Self.alice) == .init(subscriptions: 1, bytes: 3))
        unsubscribe(&ledger, "A:x", peer: "a")
        #expect(ledger.held(descriptor: 7).subscriptions == 1)
        // A cut connection's number, handed on, is not refused either.
        for topic in ["A:y", "A:z", "A:w"] { _ = subscribe(&ledger, topic, peer: "a2") }
        #expect(subscribe(&ledger, "A:v", peer: "a3") == .within)
    }

    @Test("a key's connections add up: the subscription past the key's bound is cut though its connection is within its own")
    func keyBound() {
        var ledger = SubscriptionLedger<String>(bounds: Self.bounds)
        for topic in ["A:1", "A:2", "A:3"] { #expect(subscribe(&ledger, topic, on: 1, key: Self.alice) == .within) }
        for topic in ["A:4", "A:5"] { #expect(subscribe(&ledger, topic, on: 2, peer: "b", key: Self.alice) == .within) }
        #expect(ledger.held(key: Self.alice) == .init(subscriptions: 5, bytes: 15))
        #expect(subscribe(&ledger, "A:6", on: 2, peer: "b", key: Self.alice) == .cut(held: .init(subscriptions: 3, bytes: 9), overKey: true))
        // The cut connection's topics are off the key's count; the other connection's stay.
        #expect(ledger.held(key: Self.alice) == .init(subscriptions: 3, bytes: 9))
        // Another key, and no key (an open broker), count apart.
        for topic in ["A:1", "A:2", "A:3"] { #expect(subscribe(&ledger, topic, on: 3, peer: "c", key: [2]) == .within) }
        for topic in ["A:1", "A:2", "A:3"] { #expect(subscribe(&ledger, topic, on: 4, peer: "d") == .within) }
    }

    @Test("connections that have gone are let go of, with their key's share")
    func forgetGone() {
        var ledger = SubscriptionLedger<String>(bounds: Self.bounds)
        for topic in ["A:1", "A:2"] { #expect(subscribe(&ledger, topic, on: 1, key: Self.alice) == .within) }
        for topic in ["A:3", "A:4"] { #expect(subscribe(&ledger, topic, on: 2, peer: "b", key: Self.alice) == .within) }
        #expect(ledger.forget { descriptor, _ in descriptor == 1 } == 1)
        #expect(ledger.connectionCount == 1)
        #expect(ledger.held(key: Self.alice) == .init(subscriptions: 2, bytes: 6))
        #expect(ledger.forget { _, peer in peer == "b" } == 1)
        #expect(ledger.held(key: Self.alice) == .init())
    }
}

extension SubscriptionLedger.Verdict {
    var isCut: Bool {
        if case .cut = self { return true }
        return false
    }
}
