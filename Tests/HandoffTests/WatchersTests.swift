import Foundation
import HandoffWire
import Testing

@testable import Handoff

@Suite("Discovery's watchers and the topics they follow, without streams or sockets")
struct WatchersTests {
    func activity(_ type: String, of origin: String = "node-a", keywords: [String] = []) -> DiscoveredActivity {
        var advertisement = WireAdvertisement()
        advertisement.activityID = UUID().uuidString
        advertisement.activityType = type
        advertisement.origin.nodeID = origin
        advertisement.keywords = keywords
        return DiscoveredActivity(wire: advertisement)
    }

    @Test("a type prefix is subscribed with its first follower and unsubscribed with its last")
    func followers() {
        var watchers = Watchers<String>()
        let (first, second) = (UUID(), UUID())
        #expect(watchers.add(first, filter: .type(prefix: "org.handoff.contacts."), sink: "first") == ["A:org.handoff.contacts."])
        #expect(watchers.add(second, filter: ActivityFilter(typePrefixes: ["org.handoff.contacts.", "org.handoff.notes."]), sink: "second")
            == ["A:org.handoff.notes."])
        #expect(watchers.remove(first).isEmpty)  // the second still follows contacts
        #expect(Set(watchers.remove(second)) == ["A:org.handoff.contacts.", "A:org.handoff.notes."])
        #expect(watchers.remove(second).isEmpty)  // removed once only
        #expect(watchers.count == 0)
    }

    @Test("topics the configuration follows count like a watcher's")
    func configuredTopics() {
        var watchers = Watchers<String>()
        let followed = watchers.follow("A:org.handoff.")
        #expect(followed)
        let id = UUID()
        #expect(watchers.add(id, filter: .type(prefix: "org.handoff."), sink: "w").isEmpty)  // already subscribed
        #expect(watchers.remove(id).isEmpty)  // the configuration still follows it
        let last = watchers.unfollow("A:org.handoff.")
        #expect(last)
        let unknown = watchers.unfollow("A:org.other.")
        #expect(!unknown)
    }

    @Test("an event goes to every watcher whose filter matches: type prefix, node, keywords")
    func sinks() {
        var watchers = Watchers<String>()
        _ = watchers.add(UUID(), filter: .all, sink: "all")
        _ = watchers.add(UUID(), filter: .type(prefix: "org.handoff.contacts."), sink: "contacts")
        _ = watchers.add(UUID(), filter: .node("node-b"), sink: "node-b")
        _ = watchers.add(UUID(), filter: .keywords(["Ada"]), sink: "ada")
        #expect(Set(watchers.sinks(for: activity("org.handoff.contacts.edit-contact"))) == ["all", "contacts"])
        #expect(Set(watchers.sinks(for: activity("org.handoff.notes.edit-note", of: "node-b", keywords: ["ada"]))) == ["all", "node-b", "ada"])
        #expect(Set(watchers.removeAll()) == ["all", "contacts", "node-b", "ada"])
        #expect(watchers.sinks(for: activity("org.handoff.contacts.edit-contact")).isEmpty)
    }
}
