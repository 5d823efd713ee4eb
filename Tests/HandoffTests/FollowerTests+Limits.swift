import Foundation
import HandoffWire
import Testing
@testable import Handoff

/// The follower's bounds on what a peer may make it hold: names within the contract's lengths,
/// replay protection's share per sender, leases of at most an hour.
extension FollowerTests {
    @Test("rule: one length rule for nodes and brokers: an activity id of 1 to 128 bytes, a type of at most 255, a node and a sender id of at most 128; each breach named in words, the first first")
    func busLengthRule() {
        let (id, type, node) = (WireLimits.maxActivityID, WireLimits.maxActivityType, WireLimits.maxNodeID)
        #expect(WireLimits.pastBusLengths(activityID: id, activityType: type, nodeID: node, senderID: node) == nil)
        #expect(WireLimits.pastBusLengths(activityID: nil, nodeID: node) == nil, "a presence names no activity")
        #expect(WireLimits.pastBusLengths(activityID: 0, nodeID: 1) == "names an activity id of 0 bytes (the contract allows 1 to \(id))")
        #expect(WireLimits.pastBusLengths(activityID: id + 1, nodeID: node + 1)?.hasPrefix("names an activity id of \(id + 1) bytes") == true)
        #expect(WireLimits.pastBusLengths(activityID: 1, activityType: type + 1, nodeID: 1)?.contains("activity type of \(type + 1) bytes") == true)
        #expect(WireLimits.pastBusLengths(activityID: 1, nodeID: node + 1)?.contains("node id of \(node + 1) bytes") == true)
        #expect(WireLimits.pastBusLengths(activityID: 1, nodeID: 1, senderID: node + 1)?.contains("sender id of \(node + 1) bytes") == true)
        #expect(WireLimits.fitsBus(activityID: [UInt8](repeating: 1, count: id), activityType: [UInt8](repeating: 1, count: type), nodeID: [UInt8](repeating: 1, count: node)))
        #expect(!WireLimits.fitsBus(activityID: [UInt8](), nodeID: [UInt8]()))
    }

    @Test("an advertisement, withdrawal or presence naming an activity id past 128 bytes (or none), a type past 255 or a node id past 128, or a presence whose node name, host or endpoint is past 256, 255 or 512, is ignored as malformed, and nothing of it is kept")
    func pastContractLengths() {
        var follower = Follower(settings())
        let origin = node("o1"), longNode = node(String(repeating: "n", count: WireLimits.maxNodeID + 1))
        let longest = String(repeating: "i", count: WireLimits.maxActivityID)
        #expect(events(hear(&follower, advertisement(longest, of: origin), from: origin, sequence: 1)) == ["appeared \(longest) v1"])
        func malformed(_ actions: [Follower.Action]) -> Bool {
            actions.contains { if case .ignored(.malformed) = $0 { true } else { false } }
        }
        #expect(malformed(hear(&follower, advertisement(longest + "i", of: origin), from: origin, sequence: 2)))
        #expect(malformed(hear(&follower, advertisement("", of: origin), from: origin, sequence: 3)))
        #expect(malformed(hear(&follower, advertisement("b", of: origin, type: "org." + String(repeating: "t", count: 252)), from: origin, sequence: 4)))
        #expect(malformed(hear(&follower, advertisement("c", of: longNode), from: longNode, sequence: 1)))
        #expect(malformed(hear(&follower, withdrawal(longest, of: longNode), from: longNode, sequence: 2)))
        #expect(malformed(hear(&follower, presence(of: origin, listing: [longest, longest + "i"]), from: origin, sequence: 5, topic: "P:o1")))
        #expect(malformed(hear(&follower, presence(of: longNode, listing: []), from: longNode, sequence: 3, topic: "P:n")))
        // A name, host or continue endpoint past 256, 255 or 512 bytes: the directory would hold it.
        var longName = node("o2"), longHost = node("o3")
        longName.name = String(repeating: "x", count: WireLimits.maxNodeName + 1)
        longHost.host = String(repeating: "h", count: WireLimits.maxHost + 1)
        #expect(malformed(hear(&follower, presence(of: longName, listing: []), from: longName, sequence: 1, topic: "P:o2")))
        #expect(malformed(hear(&follower, presence(of: longHost, listing: []), from: longHost, sequence: 1, topic: "P:o3")))
        var longEndpoint = WireNodePresence()
        longEndpoint.node = node("o4")
        longEndpoint.continueEndpoint = "tcp://" + String(repeating: "e", count: WireLimits.maxEndpoint)
        #expect(malformed(hear(&follower, .nodePresence(longEndpoint), from: node("o4"), sequence: 1, topic: "P:o4")))
        #expect(follower.known.count == 1 && follower.directory.nodes.isEmpty, "\(follower.directory.nodes)")
        #expect(follower.replayEntries == 1, "a malformed message was remembered by the replay guard")
    }

    @Test("replay protection holds at most ten nodes' quotas of subjects per sender: a sender naming fresh ids as fast as it can grows it no further")
    func replayProtectionBounded() {
        var follower = Follower(settings(maxPerNode: 1))
        let origin = node("o1")
        for index in 0..<25 {
            _ = hear(&follower, advertisement("fresh-\(index)", of: origin), from: origin, sequence: UInt64(index + 1))
        }
        #expect(follower.replayEntries == 10, "\(follower.replayEntries) entries for one sender")
        #expect(follower.known.count == 1)
    }

    @Test("a lease past the contract's hour is granted as an hour: an advertisement and a presence claiming 49 days are gone an hour after they were last heard")
    func leasesAreCapped() {
        var follower = Follower(settings())
        let origin = node("o1")
        guard case .advertisement(var claiming) = advertisement("a", of: origin) else { return }
        claiming.leaseMs = .max
        _ = hear(&follower, .advertisement(claiming), from: origin, sequence: 1)
        var presence = WireNodePresence()
        presence.node = origin
        presence.activityIds = ["a"]
        presence.leaseMs = .max
        _ = hear(&follower, .nodePresence(presence), from: origin, sequence: 2, topic: "P:o1")
        #expect(follower.known.count == 1 && follower.directory.nodes.count == 1)
        #expect(events(follower.tick(now: start + .seconds(3_599), date: date.addingTimeInterval(3_599))).isEmpty)
        let lapsed = follower.tick(now: start + .seconds(3_601), date: date.addingTimeInterval(3_601))
        #expect(events(lapsed) == ["removed a lost"], "\(events(lapsed))")
        #expect(follower.known.count == 0 && follower.directory.nodes.isEmpty, "a node claiming 49 days is still known after an hour")
    }
}
