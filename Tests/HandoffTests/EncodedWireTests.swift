import Foundation
import HandoffWire
import SwiftProtobuf
import Testing
@testable import Handoff

/// The full activity a continue reply carries, encoded once for as long as it holds
/// (`UserActivity+EncodedWire.swift`).
@Suite("A continue reply's activity, encoded once while it holds")
struct EncodedWireTests {
    private static func origin(_ id: String) -> WireNodeRef {
        var origin = WireNodeRef()
        origin.nodeID = id
        origin.name = "node \(id)"
        return origin
    }

    /// The encoded activity decodes to the activity as sent now, and names its version.
    private static func expectCurrent(_ activity: UserActivity, _ what: String, origin: WireNodeRef = origin("a"), team: String? = nil) throws {
        let encoded = activity.encodedWire(origin: origin, defaultTeamID: team)
        #expect(try WireActivity(serializedBytes: encoded.bytes) == activity.wire(origin: origin, defaultTeamID: team), "\(what)")
        #expect(encoded.version == activity.version, "\(what)")
    }

    @Test("rule: the encoded activity is the activity as sent after every change the wire carries: each property set, entries added, another origin or default team, and becoming current (its time stamped, its version not bumped)")
    func followsEveryChange() async throws {
        let activity = try UserActivity(activityType: "org.handoff.test.encoded")
        try Self.expectCurrent(activity, "new")
        try Self.expectCurrent(activity, "again, unchanged")
        activity.title = "Editing"
        try Self.expectCurrent(activity, "title")
        activity.userInfo = ["page": 3, "name": "Ada"]
        try Self.expectCurrent(activity, "userInfo")
        activity.addUserInfoEntries(from: ["zoom": 1.5])
        try Self.expectCurrent(activity, "entries added")
        activity.requiredUserInfoKeys = ["page"]
        activity.keywords = ["draft"]
        activity.webpageURL = URL(string: "https://example.org/doc")
        activity.expirationDate = Date(timeIntervalSinceNow: 600)
        activity.supportsContinuationStreams = true
        activity.teamID = "T1"
        try Self.expectCurrent(activity, "keys, keywords, webpage, expiry, streams, team")
        try Self.expectCurrent(activity, "another origin", origin: Self.origin("b"))
        activity.teamID = nil
        try Self.expectCurrent(activity, "a default team", team: "T2")
        try Self.expectCurrent(activity, "no default team")
        try await withTwoNodes { a, b in
            try await activity.becomeCurrent(on: a)
            try Self.expectCurrent(activity, "current on a")
            try await activity.becomeCurrent(on: b)
            try Self.expectCurrent(activity, "moved to b")
        }
    }
}
