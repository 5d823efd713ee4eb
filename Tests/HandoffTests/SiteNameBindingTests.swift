import Foundation
import Testing
import ZeroMQ
@testable import Handoff
import HandoffTestSupport

/// A secure broker binds each site's name to the key that subscribed under it (SiteInterests):
/// a member holding a valid key cannot pose as many sites, to have every message sent once per
/// name it makes up, nor follow more under a real site's name. Real brokers, CURVE, raw sockets.
@Suite("Sites: a site's name belongs to one key", .exclusive)
struct SiteNameBindingTests {
    /// A CURVE subscriber to `broker`'s backend under `keys`, subscribed to `topics` in order.
    private static func secureSubscriber(_ keys: CurveKeyPair, account: TestAccount, to broker: Broker, topics: [String], context: Context) throws -> Socket {
        let socket = try context.socket(.sub)
        try account.security(keys).secureClient(socket, serverKey: account.broker.publicKey)
        try socket.set(.receiveHighWaterMark, 0)
        for topic in topics { try socket.subscribe(topic) }
        try socket.connect(broker.backendEndpoint)
        return socket
    }

    /// The topics of the messages `socket` receives until `quiet` passes with none.
    private static func topicsReceived(on socket: Socket, quiet: Duration) async throws -> [String] {
        var topics: [String] = []
        while let frames = try await receiveMessage(socket, timeout: quiet) {
            topics.append(String(decoding: frames[0].bytes, as: UTF8.self))
        }
        return topics
    }

    @Test("a member's key speaks for at most 8 site names (20 made up: each message goes to 8), and not for a name a relay's broker holds: nothing more goes down under that site's name")
    func namesBoundToKeys() async throws {
        let account = try TestAccount()
        var configuration = Broker.Configuration(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*")
        configuration.security = Security(keyPair: account.broker, authorizedKeys: account.members)
        configuration.relayKeys = [account.b.publicKey]
        let hub = try Broker.start(configuration, context: try Context())
        let context = try Context()
        // The relay's site follows advertisements of one type prefix, under its own name.
        let relay = try Self.secureSubscriber(account.b, account: account, to: hub, topics: ["L:real|A:org.binding."], context: context)
        try await waitUntil(within: .seconds(5)) { hub.counters.subscriptions >= 1 }
        // A member that is no relay: twenty made-up names and the real site's, each following
        // everything (an empty prefix).
        let posing = (0..<20).map { "L:fake\($0)|" } + ["L:real|"]
        let member = try Self.secureSubscriber(account.a, account: account, to: hub, topics: posing, context: context)
        try await waitUntil(within: .seconds(5)) { hub.counters.siteInterestsRefused >= 13 }
        #expect(hub.counters.siteInterestsRefused == 13, "12 names past the eight, and the real site's")
        // (A withdrawal of what the real site follows, from a member that never followed it,
        // libzmq's XPUB passes up too; libzmq's own sockets never send one, so SiteInterestsTests
        // and ForwardedInterestTests hold that rule.)

        var node = nodeOnBroker("author", broker: hub, security: account.security(account.a))
        node.subscriptions = []
        try await withNodes([node]) { nodes in
            let activity = try UserActivity(activityType: "org.binding.edit")
            try await activity.becomeCurrent(on: nodes[0])
            try await waitUntil(within: .seconds(5)) { hub.counters.cachedActivities == 1 }
            try await Task.sleep(for: .milliseconds(500))
        }
        let toMember = try await Self.topicsReceived(on: member, quiet: .milliseconds(300))
        let toRelay = try await Self.topicsReceived(on: relay, quiet: .milliseconds(100))
        member.close()
        relay.close()
        await hub.stop()
        // Each advertisement went down once per name the member's key holds: eight, not twenty.
        let namesHeard = Set(toMember.filter { $0.hasPrefix("L:fake") && $0.hasSuffix("|A:org.binding.edit") }.map { $0.split(separator: "|")[0] })
        // (Which eight is libzmq's: a subscriber sends its subscriptions in its own order.)
        #expect(namesHeard.count == SiteInterests.maxNamesPerKey, "\(namesHeard.sorted())")
        // The real site's name stayed its relay's, and what it follows too: the member's empty
        // prefix under it was refused (no presence went down under it).
        #expect(toRelay.contains("L:real|A:org.binding.edit"), "\(toRelay)")
        #expect(!toMember.contains { $0.hasPrefix("L:real|P:") }, "\(toMember.filter { $0.hasPrefix("L:real|") })")
    }
}
