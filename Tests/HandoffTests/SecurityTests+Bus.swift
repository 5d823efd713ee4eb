import Foundation
@testable import Handoff
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
import HandoffTestSupport

/// More of the security suite: what nodes ignore on the bus, when they insist on CURVE, key files.
extension SecurityTests {
    @Test("replayed, stale and foreign advertisements are ignored")
    func replays() async throws {
        let context = try Context()
        let publisher = try context.socket(.xpub)
        try publisher.bind("tcp://127.0.0.1:*")
        try await withNodes([testConfiguration("node-b", peers: [try publisher.lastEndpoint])]) { nodes in
            let b = nodes[0]
            let events = await b.discover()
            // Wait for B's subscription to advertisements before publishing (PUB drops what nobody
            // subscribed to); its standing subscription to presences may come first.
            while try await publisher.receive().bytes != [1] + Array("A:".utf8) {}

            let origin = NodeInfo(id: "origin-node", name: "origin", host: "h").wire
            func send(_ body: WireEnvelope.OneOf_Body, sequence: UInt64, sentAt: Date = Date(), sender: WireNodeRef = origin) async throws -> [UInt8] {
                let bytes: [UInt8] = try WireEnvelope(body: body, sender: sender, sequence: sequence, sentAt: sentAt).serializedBytes()
                try await publisher.send(Array("A:org.handoff.test.replay".utf8), more: true)
                try await publisher.send(bytes)
                return bytes
            }
            var advertisement = WireAdvertisement()
            advertisement.activityID = "activity-1"
            advertisement.activityType = "org.handoff.test.replay"
            advertisement.origin = origin
            advertisement.continueEndpoint = "tcp://127.0.0.1:1"
            advertisement.version = 1
            advertisement.leaseMs = 60_000
            var withdrawal = WireWithdrawal()
            withdrawal.activityID = "activity-1"
            withdrawal.activityType = "org.handoff.test.replay"
            withdrawal.origin = origin
            withdrawal.reason = .resigned

            let original = try await send(.advertisement(advertisement), sequence: 10)
            #expect(await firstEvent(in: events) { if case .appeared = $0 { true } else { false } } != nil)
            _ = try await send(.withdrawal(withdrawal), sequence: 11)
            #expect(await eventually { await b.activities().isEmpty })

            // The same bytes again: a replay. The activity must not come back.
            try await publisher.send(Array("A:org.handoff.test.replay".utf8), more: true)
            try await publisher.send(original)
            #expect(await eventually { await b.securityCounters.replayedIgnored == 1 })
            // Fresh sequence, but sent long ago: stale.
            _ = try await send(.advertisement(advertisement), sequence: 12, sentAt: Date().addingTimeInterval(-600))
            #expect(await eventually { await b.securityCounters.staleIgnored == 1 })
            // Another node speaking for the origin.
            let other = NodeInfo(id: "other-node", name: "other", host: "h").wire
            _ = try await send(.advertisement(advertisement), sequence: 13, sender: other)
            #expect(await eventually { await b.securityCounters.foreignIgnored == 1 })
            try await Task.sleep(for: .milliseconds(100))
            #expect(await b.activities().isEmpty)

            // A genuinely newer advertisement is believed.
            advertisement.version = 2
            _ = try await send(.advertisement(advertisement), sequence: 14)
            #expect(await eventually { await b.activities().count == 1 })
        }
    }

    @Test("anything beyond loopback runs secure unless insecure operation is asked for")
    func secureByDefault() async throws {
        var open = Node.Configuration(name: "open", bus: .direct(listen: "tcp://0.0.0.0:*", peers: []))
        let refusal = #expect(throws: HandoffError.self) { try Node(configuration: open) }
        #expect(refusal?.code == .invalidConfiguration)
        #expect(refusal?.message.contains("tcp://0.0.0.0:*") == true)
        open.allowInsecure = true
        _ = try Node(configuration: open)
        open.allowInsecure = false
        open.security = Security(keyPair: try .generate(), authorizedKeys: [])
        _ = try Node(configuration: open)

        #expect(throws: HandoffError.self) {
            try Broker.start(.init(frontend: "tcp://*:*", backend: "tcp://127.0.0.1:*"), context: try Context())
        }
        var secure = Broker.Configuration(frontend: "tcp://*:*", backend: "tcp://*:*")
        secure.security = Security(keyPair: try .generate(), authorizedKeys: [])
        await (try Broker.start(secure, context: try Context())).stop()

        #expect(Security.isLocal("tcp://127.0.0.1:5555"))
        #expect(Security.isLocal("tcp://localhost:5555"))
        #expect(Security.isLocal("tcp://[::1]:5555"))
        #expect(Security.isLocal("ipc:///run/handoff.sock"))
        #expect(Security.isLocal("inproc://x"))
        #expect(!Security.isLocal("tcp://10.0.0.5:5555"))
        #expect(!Security.isLocal("tcp://*:5555"))
        #expect(!Security.isLocal("tcp://eth0;10.0.0.5:5555"))
    }

    @Test("key files: keygen writes a 0600 secret and a public key; folders are accounts; bad files are clear errors")
    func keyFiles() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let made = try KeyFile.generate(name: "laptop", in: folder)
        _ = try KeyFile.generate(name: "desk", in: folder)
        let attributes = try FileManager.default.attributesOfItem(atPath: made.secret.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        #expect(try KeyFile.readKeyPair(at: made.secret.path) == made.keyPair)
        #expect(try KeyFile.readPublicKey(made.public.path) == made.keyPair.publicKey)
        #expect(try KeyFile.readPublicKey(made.keyPair.publicKey.z85) == made.keyPair.publicKey)
        #expect(try KeyFile.readPublicKeys(at: folder.path).count == 2)

        let again = #expect(throws: HandoffError.self) { try KeyFile.generate(name: "laptop", in: folder) }
        #expect(again?.message.contains("exists already") == true)
        let notSecret = #expect(throws: HandoffError.self) { try KeyFile.readKeyPair(at: made.public.path) }
        #expect(notSecret?.message.contains("no secret-key") == true)
        let other = try CurveKeyPair.generate()
        let mismatched = folder.appendingPathComponent("bad.key")
        try "public-key = \"\(other.publicKey.z85)\"\nsecret-key = \"\(made.keyPair.secretKey.z85)\"\n".write(to: mismatched, atomically: true, encoding: .utf8)
        let mismatch = #expect(throws: HandoffError.self) { try KeyFile.readKeyPair(at: mismatched.path) }
        #expect(mismatch?.message.contains("does not belong") == true)
    }
}
