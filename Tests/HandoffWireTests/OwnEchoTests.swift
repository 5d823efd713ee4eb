import Foundation
import HandoffWire
import SwiftProtobuf
import Testing

/// `WireOwnEcho.matches` against what the full decode says about the same bytes.
@Suite struct OwnEchoTests {
    static let me = Fixtures.node.nodeID

    static func matches(_ bytes: [UInt8], _ id: String = me) -> Bool {
        bytes.withUnsafeBytes { WireOwnEcho.matches($0, nodeID: Array(id.utf8)) }
    }

    /// What the full decode says: an advertisement or withdrawal sent by `id` about its own activity.
    static func isOwn(_ bytes: [UInt8], _ id: String = me) -> Bool? {
        guard let envelope = try? WireEnvelope.decode(bytes) else { return nil }
        switch envelope.body {
        case .advertisement(let ad): return envelope.sender.nodeID == id && ad.origin.nodeID == id
        case .withdrawal(let withdrawal): return envelope.sender.nodeID == id && withdrawal.origin.nodeID == id
        default: return false
        }
    }

    @Test func ownAdvertisementsAndWithdrawalsAreRecognised() throws {
        let ad: [UInt8] = try Fixtures.envelope(.advertisement(Fixtures.advertisement)).serializedBytes()
        let withdrawal: [UInt8] = try Fixtures.envelope(.withdrawal(WireWithdrawal.with {
            $0.activityID = "a"
            $0.origin = Fixtures.node
        })).serializedBytes()
        #expect(Self.matches(ad) && Self.matches(withdrawal))
        // Another node's, or a prefix of the id.
        #expect(!Self.matches(ad, "another-node") && !Self.matches(withdrawal, String(Self.me.dropLast())))
    }

    @Test func everyOtherBodyIsDecoded() throws {
        for body in Fixtures.bodies {
            let bytes: [UInt8] = try Fixtures.envelope(body).serializedBytes()
            switch body {
            case .advertisement, .withdrawal: #expect(Self.matches(bytes) == (Self.isOwn(bytes) == true))
            default: #expect(!Self.matches(bytes), "\(Fixtures.caseName(body))")  // presences included: the node reads its own
            }
        }
    }

    @Test func aSenderThatIsNotTheOriginIsDecoded() throws {
        var ad = Fixtures.advertisement
        ad.origin.nodeID = "another-node"
        #expect(!Self.matches(try Fixtures.envelope(.advertisement(ad)).serializedBytes()))
    }

    /// Two envelopes one after the other merge: two senders, two bodies; left to the full decode.
    @Test func mergedEnvelopesAreDecoded() throws {
        let ad: [UInt8] = try Fixtures.envelope(.advertisement(Fixtures.advertisement)).serializedBytes()
        #expect(!Self.matches(ad + ad))
    }

    /// Random envelopes (half of them the node's own), then damaged: whatever is recognised as
    /// the node's own and decodes, decodes to the node's own; every intact own one is recognised.
    @Test func randomAndDamagedEnvelopesAgreeWithTheFullDecode() throws {
        var random = SplitMix(seed: 0xEC40)
        var own = 0, recognisedDamaged = 0
        for _ in 0..<400 {
            var envelope = BusSummaryTests.randomEnvelope(&random)
            if random.next() % 2 == 0 {
                envelope.sender.nodeID = Self.me
                switch envelope.body {
                case .advertisement(var ad):
                    ad.origin.nodeID = Self.me
                    envelope.body = .advertisement(ad)
                case .withdrawal(var withdrawal):
                    withdrawal.origin.nodeID = Self.me
                    envelope.body = .withdrawal(withdrawal)
                default: break
                }
            }
            let bytes: [UInt8] = try envelope.serializedBytes()
            #expect(Self.matches(bytes) == (Self.isOwn(bytes) == true), "\(envelope)")
            if Self.matches(bytes) { own += 1 }
            for _ in 0..<20 {
                var damaged = bytes
                damaged[Int(random.next() % UInt64(damaged.count))] ^= UInt8(1 << (random.next() % 8))
                guard Self.matches(damaged) else { continue }
                recognisedDamaged += 1
                #expect(Self.isOwn(damaged) != false, "recognised as own, decoded as another's: \(damaged)")
            }
        }
        #expect(own > 100 && recognisedDamaged > 100, "\(own) own, \(recognisedDamaged) damaged and recognised")
    }
}
