import Foundation
import HandoffWire
import Testing

@testable import Handoff

/// DiscoveredActivity and ContinuedActivity keep their fields in one shared object: as values they
/// must still compare and hash by their fields, whichever object holds them.
@Suite("Discovered and continued activities are values: equal and hashed by their fields")
struct ActivityValueTests {
    static func advertisement(title: String = "Draft", keywords: [String] = ["mail"]) -> WireAdvertisement {
        var advertisement = WireAdvertisement()
        advertisement.activityID = "activity-1"
        advertisement.activityType = "org.handoff.test.value"
        advertisement.title = title
        advertisement.origin.nodeID = "node-a"
        advertisement.origin.name = "A"
        advertisement.origin.host = "host-a"
        advertisement.continueEndpoint = "tcp://host-a:5600"
        advertisement.version = 3
        advertisement.leaseMs = 6_000
        advertisement.webpageURL = "https://example.org/draft"
        advertisement.keywords = keywords
        advertisement.updatedAt = WireTimestamp(Date(timeIntervalSince1970: 1_790_000_000))
        return advertisement
    }

    static func wireActivity(userInfo: [String: UserInfoValue] = ["to": .string("b@example.org")]) -> WireActivity {
        var activity = WireActivity()
        activity.activityID = "activity-1"
        activity.activityType = "org.handoff.test.value"
        activity.title = "Draft"
        activity.userInfo = wireUserInfo(userInfo)
        activity.requiredUserInfoKeys = Array(userInfo.keys)
        activity.keywords = ["mail", "draft"]
        activity.origin.nodeID = "node-a"
        activity.version = 3
        activity.updatedAt = WireTimestamp(Date(timeIntervalSince1970: 1_790_000_000))
        return activity
    }

    @Test("rule: two discovered activities made apart from the same advertisement are equal and hash alike; a field apart makes them differ")
    func discoveredByFields() {
        let first = DiscoveredActivity(wire: Self.advertisement())
        let second = DiscoveredActivity(wire: Self.advertisement())
        #expect(first == second)
        #expect(first.hashValue == second.hashValue)
        #expect(Set([first, second]).count == 1)
        #expect(first != DiscoveredActivity(wire: Self.advertisement(title: "Other")))
        #expect(first != DiscoveredActivity(wire: Self.advertisement(keywords: ["mail", "x"])))
        let copy = first
        #expect(copy == first && copy.title == "Draft" && copy.origin.host == "host-a" && copy.keywords == ["mail"])
        #expect(first.webpageURL == URL(string: "https://example.org/draft") && first.lease == .seconds(6))
    }

    @Test("rule: an activity taken out of an advertisement's plain values equals the one copied from it, and leaves their strings empty; no origin reads as an empty node")
    func discoveredTakenEqualsCopied() {
        let copied = DiscoveredActivity(wire: Self.advertisement())
        var plain = WirePlainAdvertisement(Self.advertisement())
        let taken = DiscoveredActivity(taking: &plain)
        #expect(taken == copied)
        #expect(taken.origin == copied.origin && taken.origin.name == "A" && taken.keywords == ["mail"])
        #expect(plain.activityID.isEmpty && plain.title.isEmpty && plain.keywords.isEmpty && plain.origin == nil)
        #expect(plain.version == 3, "what is not reference-counted stays")

        var originless = WirePlainAdvertisement(Self.advertisement())
        originless.origin = nil
        #expect(DiscoveredActivity(taking: &originless).origin == NodeInfo(wire: WireNodeRef()))
    }

    @Test("rule: two continued activities made apart from the same reply are equal and hash alike; another userInfo value makes them differ")
    func continuedByFields() throws {
        let first = try ContinuedActivity(wire: Self.wireActivity(), continueEndpoint: "tcp://host-a:5600")
        let second = try ContinuedActivity(wire: Self.wireActivity(), continueEndpoint: "tcp://host-a:5600")
        #expect(first == second)
        #expect(first.hashValue == second.hashValue)
        let other = try ContinuedActivity(wire: Self.wireActivity(userInfo: ["to": .string("c@example.org")]), continueEndpoint: "tcp://host-a:5600")
        #expect(first != other)
        #expect(first != (try ContinuedActivity(wire: Self.wireActivity(), continueEndpoint: "tcp://elsewhere:1")))
        #expect(first.userInfo == ["to": .string("b@example.org")] && first.keywords == ["mail", "draft"] && first.requiredUserInfoKeys == ["to"])
    }

    @Test("rule: a continued activity missing a required key is refused with its typed error")
    func continuedMissingRequiredKey() {
        var wire = Self.wireActivity()
        wire.requiredUserInfoKeys.append("subject")
        #expect(throws: HandoffError.self) { try ContinuedActivity(wire: wire, continueEndpoint: "tcp://host-a:5600") }
        do {
            _ = try ContinuedActivity(wire: wire, continueEndpoint: "tcp://host-a:5600")
        } catch {
            #expect(error.code == .missingRequiredUserInfoKey)
        }
    }

    @Test("rule: an activity's webpage URL is http or https, in any case; another scheme is refused when it is checked")
    func webpageSchemes() throws {
        for (url, allowed) in [("https://example.org/a", true), ("HTTP://example.org/a", true), ("ftp://example.org/a", false), ("file:///tmp/a", false)] {
            let activity = try UserActivity(activityType: "org.handoff.test.value")
            activity.webpageURL = URL(string: url)
            if allowed {
                #expect(throws: Never.self) { try activity.validate(maxUserInfoSize: 1 << 20) }
            } else {
                #expect(throws: HandoffError.self, "\(url)") { try activity.validate(maxUserInfoSize: 1 << 20) }
            }
        }
    }

    @Test("rule: a check that passed holds only for the version it passed at and its size limit: a change, a smaller limit or a passed expiry is checked again")
    func checksHoldPerVersion() throws {
        let activity = try UserActivity(activityType: "org.handoff.test.value")
        activity.userInfo = ["note": .string(String(repeating: "a", count: 100))]
        try activity.validate(maxUserInfoSize: 1 << 20)
        try activity.validate(maxUserInfoSize: 1 << 20)
        #expect(throws: HandoffError.self, "a smaller limit") { try activity.validate(maxUserInfoSize: 50) }
        activity.userInfo["more"] = .string(String(repeating: "b", count: 2_000))
        #expect(throws: HandoffError.self, "a change past the limit") { try activity.validate(maxUserInfoSize: 1_000) }
        activity.requiredUserInfoKeys = ["missing"]
        #expect(throws: HandoffError.self, "a required key missing") { try activity.validate(maxUserInfoSize: 1 << 20) }
        activity.requiredUserInfoKeys = []
        try activity.validate(maxUserInfoSize: 1 << 20)
        activity.expirationDate = Date().addingTimeInterval(60)
        try activity.validate(maxUserInfoSize: 1 << 20)
        #expect(throws: HandoffError.self, "past its expiry") { try activity.validate(maxUserInfoSize: 1 << 20, now: Date().addingTimeInterval(120)) }
    }

    @Test("contract: a userInfo value with no kind (null, or a kind a newer version added) is left out, in userInfo, a map and a list; the rest of the activity continues")
    func kindlessValuesLeftOut() throws {
        var wire = Self.wireActivity(userInfo: ["to": .string("b@example.org"), "count": .int(3)])
        let kindless = WireValue()
        wire.userInfo["cleared"] = kindless
        var list = WireValueList()
        list.values = [UserInfoValue.int(1).wire, kindless, UserInfoValue.int(2).wire]
        var listValue = WireValue()
        listValue.listValue = list
        wire.userInfo["list"] = listValue
        var map = WireValueMap()
        map.entries = ["kept": UserInfoValue.bool(true).wire, "gone": kindless]
        var mapValue = WireValue()
        mapValue.mapValue = map
        wire.userInfo["map"] = mapValue
        let continued = try ContinuedActivity(wire: wire, continueEndpoint: "tcp://host-a:5600")
        #expect(continued.userInfo == [
            "to": .string("b@example.org"), "count": .int(3), "list": .list([.int(1), .int(2)]), "map": .map(["kept": .bool(true)]),
        ])
    }
}
