import Foundation
import Glibc
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
@testable import Handoff
import HandoffTestSupport

/// A peer that speaks ZMTP itself and never finishes a message, at the other end of a connection
/// the node made: to a continue endpoint a member advertised, and to a direct peer's publisher
/// (NodeUnfinishedMessageTests does the same at the sockets the node serves on).
@Suite("Node: a message that never ends, from a peer the node connected to", .exclusive)
struct NodeConnectedUnfinishedMessageTests {
    /// A direct peer's publisher, played by an XPUB: what it publishes reaches the node as a peer's.
    struct FakePeer {
        let publisher: Socket
        let origin = NodeInfo(id: "fake-peer", name: "fake", host: "h").wire
        var sequence: UInt64 = 0

        init(_ context: Context) throws {
            publisher = try context.socket(.xpub)
            try publisher.bind("tcp://127.0.0.1:*")
        }

        /// Waits for the node's subscription to every activity (its `discover()`).
        func awaitSubscriber() async throws {
            while try await publisher.receive().bytes != [1] + Array("A:".utf8) {}
        }

        /// Advertises an activity whose continue endpoint is `endpoint`, leased for a minute.
        mutating func advertise(_ id: String, type: String, continueEndpoint endpoint: String) async throws {
            var advertisement = WireAdvertisement()
            advertisement.activityID = id
            advertisement.activityType = type
            advertisement.origin = origin
            advertisement.continueEndpoint = endpoint
            advertisement.version = 1
            advertisement.leaseMs = 60_000
            sequence += 1
            try await publisher.send(Array("A:\(type)".utf8), more: true)
            try await publisher.send(try WireEnvelope(body: .advertisement(advertisement), sender: origin, sequence: sequence).serializedBytes() as [UInt8])
        }
    }

    @Test("an originator (whose continue endpoint any member may advertise) that answers a continue with the frames of one message forever is cut once past the bound, and counted; the continue fails with a typed error, and the node goes on")
    func endlessReplyIsCut() async throws {
        let originator = try RawTCPListener()
        defer { originator.close() }
        let context = try Context()
        var peer = try FakePeer(context)
        try await withNodes([testConfiguration("continuer", peers: [try peer.publisher.lastEndpoint])]) { nodes in
            let continuer = nodes[0]
            await continuer.setContinuationHandler(forType: "org.unfinished.reply") { _ in }
            let events = await continuer.discover()
            try await peer.awaitSubscriber()
            try await peer.advertise("hostile", type: "org.unfinished.reply", continueEndpoint: originator.endpoint)
            let found = try await discovered("hostile", on: continuer)

            let continuing = Task { try await continuer.continueActivity(found) }
            let fd = try await originator.accept(within: .seconds(5))
            defer { close(fd) }
            try await expectEndlessMessageCut(on: fd, claiming: "ROUTER", by: continuer)
            let outcome = await continuing.result
            guard case .failure(let failure) = outcome, let error = failure as? HandoffError else {
                Issue.record("the continue from the hostile originator ended \(outcome)")
                return
            }
            // Ended by the cut (the originator dropped), not by the continue's timeout.
            #expect(error.code == .connectionUnavailable && error.message.contains("disconnected"), "\(error)")

            // The node goes on: the bus still reaches it.
            try await peer.advertise("after", type: "org.unfinished.reply", continueEndpoint: originator.endpoint)
            #expect(await firstEvent(in: events) { $0.activity.id == "after" } != nil)
            #expect(await continuer.securityCounters.unfinishedMessagesCut == 1)
        }
    }

    @Test("a direct peer whose publisher sends the frames of one message forever to the node's subscriber is cut once past the bound, and counted; the node's other peer still reaches it")
    func endlessBusMessageIsCut() async throws {
        let hostile = try RawTCPListener()
        defer { hostile.close() }
        let context = try Context()
        var honest = try FakePeer(context)
        try await withNodes([testConfiguration("follower", peers: [hostile.endpoint, try honest.publisher.lastEndpoint])]) { nodes in
            let follower = nodes[0]
            let fd = try await hostile.accept(within: .seconds(5))
            defer { close(fd) }
            try await expectEndlessMessageCut(on: fd, claiming: "PUB", by: follower)

            let events = await follower.discover()
            try await honest.awaitSubscriber()
            try await honest.advertise("honest", type: "org.unfinished.bus", continueEndpoint: "tcp://127.0.0.1:1")
            #expect(await firstEvent(in: events) { $0.activity.id == "honest" } != nil)
            #expect(await follower.securityCounters.unfinishedMessagesCut == 1)
        }
    }
}
