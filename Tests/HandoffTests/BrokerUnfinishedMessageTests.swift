import Foundation
import Glibc
import Testing
import ZeroMQ
@testable import Handoff
import HandoffTestSupport

/// A peer that speaks ZMTP itself and never finishes a message, against a real broker
/// (``UnfinishedMessageBound`` tests the rule itself). libzmq keeps every frame of a message until
/// its last arrives, and no libzmq peer can send one without end (its queue lets a message go only
/// once it is whole): so the peer here is a plain TCP connection that sends ZMTP's bytes by hand.
@Suite("Broker: a message that never ends", .exclusive)
struct BrokerUnfinishedMessageTests {
    /// The broker's bound sockets a peer sends to, with the socket type it claims there.
    enum Side: String, CaseIterable, CustomTestStringConvertible {
        /// As a publisher, at the frontend.
        case frontend
        /// As a subscriber, at the backend.
        case backend
        var testDescription: String { rawValue }
        var claimedType: String { self == .frontend ? "PUB" : "XSUB" }
    }

    @Test("a peer that sends the frames of one message forever is cut once it has handed the broker more than 8 MiB, and counted; its connection ends, and the bus goes on beside it (at the frontend, and at the backend alike)",
          arguments: Side.allCases)
    func endlessMessageIsCut(at side: Side) async throws {
        let context = try Context()
        let broker = try Broker.start(.ephemeral(), context: context)
        let fd = try connectRawTCP(to: side == .frontend ? broker.frontendEndpoint : broker.backendEndpoint)
        defer { close(fd) }
        try await expectCut(on: fd, claiming: side.claimedType, by: broker, context: context)
    }

    /// A site broker's link sockets, which connect out to its upstream, with the socket type the
    /// upstream's end claims.
    enum Link: String, CaseIterable, CustomTestStringConvertible {
        /// The link's up socket (XPUB), at the upstream's frontend (XSUB).
        case up
        /// The link's down socket (XSUB), at the upstream's backend (XPUB).
        case down
        var testDescription: String { rawValue }
        var claimedType: String { self == .up ? "XSUB" : "XPUB" }
    }

    @Test("an upstream that sends a site broker's link the frames of one message forever is cut once it has handed the site more than 8 MiB, and counted; its connection ends, and the site's own bus goes on (on the link's up socket, and on its down socket alike)",
          arguments: Link.allCases)
    func endlessMessageFromUpstreamIsCut(on link: Link) async throws {
        let context = try Context()
        let frontend = try RawTCPListener(), backend = try RawTCPListener()
        defer { frontend.close(); backend.close() }
        var configuration = Broker.Configuration(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*")
        configuration.upstreams = [.init(frontend: frontend.endpoint, backend: backend.endpoint)]
        let site = try Broker.start(configuration, context: context)
        let fd = try await (link == .up ? frontend : backend).accept(within: .seconds(5))
        defer { close(fd) }
        try await expectCut(on: fd, claiming: link.claimedType, by: site, context: context)
    }

    /// With a publisher and a subscriber of `broker`'s own bus passing messages, sends the frames
    /// of one message forever on `fd` (a raw TCP connection to or from `broker`, after the
    /// greeting and READY of a NULL socket of `type`); checks that the broker cut it once past the
    /// bound, counted it, and that its own bus goes on. Stops the broker.
    private func expectCut(on fd: Int32, claiming type: String, by broker: Broker, context: Context) async throws {
        let publisher = try await connectPublisher(to: broker, context: context)
        let honest = try context.socket(.sub)
        try honest.subscribe("A:")
        try honest.connect(broker.backendEndpoint)
        try await awaitDelivery(from: publisher, to: honest, probe: .presence(node: "probe", topic: "A:probe"))

        setRawSendTimeout(fd, seconds: 2)
        try sendRaw(zmtpGreeting(mechanism: "NULL") + zmtpReady(as: type), on: fd)
        // Far past the bound, or until the broker stops taking them (its end of the connection
        // gone, or nothing read for 2 s).
        let limit = 256 << 20
        let sent = await sendFramesOfOneMessageOnThread(on: fd, upTo: limit)

        try await waitUntil(within: .seconds(10)) { broker.counters.unfinishedMessagesCut >= 1 }
        #expect(broker.counters.unfinishedMessagesCut == 1)
        #expect(sent > BrokerLoop.unfinishedMessageBound, "cut before the bound: after \(sent) bytes")
        #expect(sent < limit, "never cut: it sent \(sent) bytes")
        // The broker ended the connection: the peer reads its end (or a reset), after what the
        // broker sent before (its greeting, its READY, and at the frontend its subscription).
        #expect(try await rawConnectionEnded(fd, within: .seconds(5)), "the peer's connection is still open")

        let after = try BusMessage.advertisement(id: "after", type: "unfinished")
        try await publish(after, on: publisher)
        #expect(try await receiveUntil(honest, within: .seconds(5)) { $0.bytes == after.topic })
        await broker.stop()
    }
}
