import Foundation
import Testing
@testable import Handoff

/// Whether a node is on the bus, on ``BusHealthCheck``, with no socket and no clock.
@Suite("Bus health: on the bus or not, and why (no I/O)")
struct BusHealthCheckTests {
    let now = ContinuousClock.now
    let brokers = Node.Configuration.Bus.brokers([.init(frontend: "tcp://b1:4100", backend: "tcp://b1:4101"), .init(frontend: "tcp://b2:4100", backend: "tcp://b2:4101")])

    func facts(
        bus: Node.Configuration.Bus? = nil, running: Bool = true, refusal: HandoffError? = nil,
        publisher: Bool = true, subscriber: Bool = true, proofAgo: Duration? = .milliseconds(300)
    ) -> BusHealthCheck.Facts {
        let endpoints = (publisher ? ["tcp://b1:4100"] : []) + (subscriber ? ["tcp://b1:4101", "tcp://b1:4101"] : [])
        return BusHealthCheck.Facts(
            running: running, refusal: refusal, bus: bus ?? brokers, sockets: [(true, publisher), (false, subscriber)],
            connectedEndpoints: endpoints, lastProof: proofAgo.map { now - $0 }, now: now,
            proofWindow: BusHealthCheck.proofWindow(advertiseInterval: .seconds(1)))
    }

    @Test("rule: the proof window is three presence intervals, never under a second")
    func proofWindow() {
        #expect(BusHealthCheck.proofWindow(advertiseInterval: .seconds(2)) == .seconds(6))
        #expect(BusHealthCheck.proofWindow(advertiseInterval: .milliseconds(100)) == .seconds(1))
    }

    @Test("rule: on brokers, a node is on the bus when both its sockets are connected and its own presence came back within the window; the endpoints are listed once each, sorted")
    func onBrokers() {
        let healthy = BusHealthCheck.health(facts())
        #expect(healthy.isOnBus && healthy.reason.hasPrefix("connected to tcp://b1:4100, tcp://b1:4101; its presence came back 300 ms ago"))
        #expect(healthy.connectedEndpoints == ["tcp://b1:4100", "tcp://b1:4101"])
        let noBackend = BusHealthCheck.health(facts(subscriber: false))
        #expect(!noBackend.isOnBus && noBackend.reason == "not connected to any broker's backend (tcp://b1:4101, tcp://b2:4101)")
        let noFrontend = BusHealthCheck.health(facts(publisher: false))
        #expect(!noFrontend.isOnBus && noFrontend.reason.hasPrefix("not connected to any broker's frontend"))
        let unproven = BusHealthCheck.health(facts(proofAgo: nil))
        #expect(!unproven.isOnBus && unproven.reason.contains("has not come back through a broker yet"))
        let silent = BusHealthCheck.health(facts(proofAgo: .milliseconds(3_500)))
        #expect(!silent.isOnBus && silent.reason.contains("for 3.5 s"))
        #expect(BusHealthCheck.health(facts(proofAgo: .seconds(3))).isOnBus, "the window's last instant still counts")
    }

    @Test("rule: a node not running, or refused at the handshake, is not on the bus whatever its connections, and says why")
    func notRunningOrRefused() {
        #expect(BusHealthCheck.health(facts(running: false)) == Node.BusHealth(isOnBus: false, reason: "the node is not running", connectedEndpoints: ["tcp://b1:4100", "tcp://b1:4101"]))
        let refusal = HandoffError(.unauthorized, "the broker at tcp://b1:4101 refused this node's key")
        let refused = BusHealthCheck.health(facts(refusal: refusal))
        #expect(!refused.isOnBus && refused.reason == refusal.message)
    }

    @Test("rule: direct, a node is on the bus with any peer connected, or with no peers to connect to")
    func direct() {
        let peers = Node.Configuration.Bus.direct(listen: "tcp://*:4200", peers: ["tcp://p1:4200", "tcp://p2:4200"])
        var alone = facts(bus: peers, proofAgo: nil)
        alone.connectedEndpoints = []
        let none = BusHealthCheck.health(alone)
        #expect(!none.isOnBus && none.reason == "connected to none of its 2 peers (tcp://p1:4200, tcp://p2:4200)")
        alone.connectedEndpoints = ["tcp://p1:4200"]
        #expect(BusHealthCheck.health(alone).reason == "connected to 1 of 2 peers")
        alone.bus = .direct(listen: "tcp://*:4200", peers: [])
        alone.connectedEndpoints = []
        #expect(BusHealthCheck.health(alone).isOnBus)
    }
}
