import Foundation
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
@testable import Handoff

/// The broker checks the sender rule where the envelope's fields lie, and makes the claim's values
/// only to say why a message failed: the two must agree on every message.
extension SenderCheckTests {
    enum Body: CaseIterable { case advertisement, withdrawal, presence, nodeEvent }

    func message(_ body: Body, sender: String, senderKey: [UInt8], origin: String, originKey: [UInt8]) -> [Frame] {
        func node(_ id: String, _ key: [UInt8]) -> WireNodeRef {
            var node = WireNodeRef()
            node.nodeID = id
            node.publicKey = Data(key)
            return node
        }
        let wireBody: WireEnvelope.OneOf_Body
        switch body {
        case .advertisement:
            var advertisement = WireAdvertisement()
            advertisement.activityID = "x"
            advertisement.origin = node(origin, originKey)
            advertisement.version = 1
            wireBody = .advertisement(advertisement)
        case .withdrawal:
            var withdrawal = WireWithdrawal()
            withdrawal.activityID = "x"
            withdrawal.origin = node(origin, originKey)
            wireBody = .withdrawal(withdrawal)
        case .presence:
            var presence = WireNodePresence()
            presence.node = node(origin, originKey)
            presence.activityIds = ["x"]
            wireBody = .nodePresence(presence)
        case .nodeEvent:
            wireBody = .nodeEvent(WireNodeEvent())
        }
        let envelope: [UInt8] = try! WireEnvelope(body: wireBody, sender: node(sender, senderKey), sequence: 1).serializedBytes()
        return [Frame(Array("A:t".utf8)), Frame(envelope)]
    }

    @Test("the broker's check where the fields lie agrees with the claim's on every combination of keys, origins, owners and bodies")
    func inPlaceAgreesWithClaims() {
        let keys: [[UInt8]] = [alice, mallory, []]
        var checked = 0
        for body in Body.allCases {
            for senderKey in keys {
                for originKey in keys {
                    for (sender, origin) in [("a", "a"), ("m", "a"), ("a", "m")] {
                        let content = BrokerBusContent(message(body, sender: sender, senderKey: senderKey, origin: origin, originKey: originKey))
                        let claim = try! #require(content.claim)
                        for connectionKey in [alice, mallory] {
                            for owner in [nil, alice, mallory] {
                                let inPlace = content.keepsSenderRule(connectionKey: connectionKey, ownerKey: owner)
                                let reason = SenderCheck.forgery(claim, connectionKey: connectionKey, ownerKey: claim.activityID == nil ? nil : owner)
                                #expect(inPlace == (reason == nil), "\(body) sender \(sender) \(senderKey.first ?? 0) origin \(origin) \(originKey.first ?? 0) connection \(connectionKey[0]) owner \(owner?[0] ?? 0): \(reason ?? "passes")")
                                checked += 1
                            }
                        }
                    }
                }
            }
        }
        #expect(checked == 4 * 3 * 3 * 3 * 2 * 3)
    }
}
