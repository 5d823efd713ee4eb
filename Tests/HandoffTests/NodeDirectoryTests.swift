import Foundation
import HandoffWire
import Testing
@testable import Handoff

@Suite("Node directory (state, no sockets)")
struct NodeDirectoryTests {
    func presence(_ id: String, name: String, activities: Int) -> WireNodePresence {
        var presence = WireNodePresence()
        presence.node = NodeInfo(id: id, name: name, host: "h").wire
        presence.continueEndpoint = "tcp://h:1"
        presence.activityIds = (0..<activities).map { "\(id)-\($0)" }
        return presence
    }

    @Test("a node is listed from its presence until its lease runs out; the newest presence wins")
    func leases() {
        var directory = NodeDirectory(capacity: 10)
        let now = ContinuousClock.now
        directory.heard(presence("1", name: "beta", activities: 2), lease: .seconds(1), now: now)
        directory.heard(presence("2", name: "alpha", activities: 0), lease: .seconds(3), now: now)
        #expect(directory.nodes.map(\.info.name) == ["alpha", "beta"])
        directory.heard(presence("1", name: "beta", activities: 5), lease: .seconds(1), now: now + .milliseconds(500))
        #expect(directory.nodes.last?.activityCount == 5)
        directory.expire(now: now + .seconds(2))
        #expect(directory.nodes.map(\.info.name) == ["alpha"])
        directory.remove("2")
        #expect(directory.nodes.isEmpty)
    }

    @Test("past its capacity, new nodes are not added; known ones still renew")
    func capacity() {
        var directory = NodeDirectory(capacity: 2)
        let now = ContinuousClock.now
        for id in ["a", "b", "c"] { directory.heard(presence(id, name: id, activities: 1), lease: .seconds(1), now: now) }
        #expect(directory.nodes.map(\.info.id) == ["a", "b"])
        directory.heard(presence("b", name: "b", activities: 7), lease: .seconds(1), now: now)
        #expect(directory.nodes.map(\.activityCount) == [1, 7])
    }
}
