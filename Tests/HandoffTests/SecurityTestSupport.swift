import Foundation
@testable import Handoff
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
import HandoffTestSupport

/// Key pairs for a broker, two account nodes and a stranger who is not in the account.
struct TestAccount {
    let broker: CurveKeyPair
    let a: CurveKeyPair
    let b: CurveKeyPair
    let stranger: CurveKeyPair

    init() throws {
        broker = try .generate()
        a = try .generate()
        b = try .generate()
        stranger = try .generate()
    }

    /// The account: the broker and the two nodes.
    var members: Set<CurveKey> { [broker.publicKey, a.publicKey, b.publicKey] }

    /// Security for `keys`, trusting the account (the stranger trusts it too: public keys are public).
    func security(_ keys: CurveKeyPair) -> Security {
        Security(keyPair: keys, authorizedKeys: members, brokerKey: broker.publicKey)
    }
}

/// A secure broker on loopback that admits the account, and `extra` keys besides.
func secureBroker(_ keys: TestAccount, admitting extra: Set<CurveKey> = []) throws -> Broker {
    var configuration = Broker.Configuration(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*")
    configuration.security = Security(keyPair: keys.broker, authorizedKeys: keys.members.union(extra))
    return try Broker.start(configuration, context: try Context())
}

/// A broker-bus node on loopback with short timings.
func nodeOnBroker(_ name: String, broker: Broker, security: Security?) -> Node.Configuration {
    var configuration = Node.Configuration(
        name: name, bus: .broker(frontend: broker.frontendEndpoint, backend: broker.backendEndpoint),
        advertiseInterval: .milliseconds(200), continueTimeout: .seconds(5), connectTimeout: .milliseconds(500))
    configuration.security = security
    return configuration
}

/// Runs nodes (each with its own context, as separate processes would have) for the duration of `body`.
func withNodes(
    _ configurations: [Node.Configuration], _ body: ([Node]) async throws -> Void
) async throws {
    let nodes = try configurations.map { try Node(configuration: $0) }
    try await withThrowingTaskGroup(of: Void.self) { group in
        for node in nodes { group.addTask { try await node.run() } }
        defer { group.cancelAll() }
        for node in nodes { await node.untilRunning() }
        try await body(nodes)
    }
}
