import Foundation
import HandoffWire
import SwiftProtobuf
import ZeroMQ
@testable import Handoff

/// Bus messages as a publisher sends them (topic, envelope), for the broker's machines' tests.
extension BrokerCoreTests {
    static func node(_ id: String, key: [UInt8] = [], host: String = "test") -> WireNodeRef {
        var node = WireNodeRef()
        node.nodeID = id
        node.name = id
        node.host = host
        node.publicKey = Data(key)
        return node
    }

    static func advertisement(
        _ id: String, from origin: String, key: [UInt8] = [], version: UInt64 = 1, sender: String? = nil, leaseMs: UInt32 = 60_000,
        host: String = "test"
    ) -> [Frame] {
        var advertisement = WireAdvertisement()
        advertisement.activityID = id
        advertisement.activityType = "org.test.type"
        advertisement.origin = node(origin, key: key, host: host)
        advertisement.continueEndpoint = "tcp://127.0.0.1:1"
        advertisement.version = version
        advertisement.leaseMs = leaseMs
        let envelope: [UInt8] = try! WireEnvelope(
            body: .advertisement(advertisement), sender: node(sender ?? origin, key: key, host: host), sequence: version).serializedBytes()
        return [Frame(Array("A:org.test.type".utf8)), Frame(envelope)]
    }

    static func presence(of origin: String, listing ids: [String], key: [UInt8] = [], leaseMs: UInt32 = 6_000) -> [Frame] {
        var presence = WireNodePresence()
        presence.node = node(origin, key: key)
        presence.leaseMs = leaseMs
        presence.activityIds = ids
        let envelope: [UInt8] = try! WireEnvelope(body: .nodePresence(presence), sender: node(origin, key: key), sequence: 9).serializedBytes()
        return [Frame(Array("P:".utf8)), Frame(envelope)]
    }
}
