import Foundation
@testable import Handoff
import Testing

@Suite("Bus topics as bytes")
struct TopicTests {
    @Test("an activity's and an event's topic are the prefix and the type's UTF-8, for short (inline) and long types, ASCII or not")
    func topicBytes() {
        for type in ["", "a", "org.x", "org.handoff.contacts.edit-contact", "org.exämple.ünïcode", "org.例え.型", String(repeating: "t", count: 300)] {
            #expect(Topic.activity(type) == Array(("A:" + type).utf8), "\(type)")
            #expect(Topic.event(type) == Array(("E:" + type).utf8), "\(type)")
        }
    }
}
