import Foundation
@testable import Handoff
import HandoffWire
import Testing
import HandoffTestSupport

@Suite("UserActivity", .exclusive)
struct ActivityTests {
    @Test("activity types must be reverse-DNS", arguments: [
        "", "contacts", ".org.handoff", "org..handoff", "org.handoff.", "org.handoff.edit contact", "org.handoff.édition",
        String(repeating: "a.", count: 128) + "b",
    ])
    func invalidTypes(type: String) {
        #expect(throws: HandoffError.self) { try UserActivity(activityType: type) }
        do {
            _ = try UserActivity(activityType: type)
        } catch {
            #expect(error.code == .invalidActivityType)
            #expect(error.message.contains("reverse-DNS"))
        }
    }

    @Test("well-formed types are accepted", arguments: [
        "org.handoff.contacts.edit-contact", "com.example.Notes.view_note", "io.x", "org.handoff.v2.list-contacts",
    ])
    func validTypes(type: String) throws {
        #expect(try UserActivity(activityType: type).activityType == type)
    }

    @Test("activity ids are distinct version-4 UUIDs")
    func identifiers() throws {
        let ids = try (0..<1000).map { _ in try UserActivity(activityType: "org.handoff.test.ids").id }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(50) {
            let uuid = try #require(UUID(uuidString: id), "\(id) is not a UUID")
            #expect(uuid.uuidString == id)
            #expect(Array(id)[14] == "4", "version nibble of \(id)")
            #expect("89AB".contains(Array(id)[19]), "variant of \(id)")
        }
    }

    @Test("ids are formatted as Foundation formats a UUID")
    func idFormat() {
        for raw: [UInt8] in [Array(0..<16), Array(repeating: 0xFF, count: 16), [0xDE, 0xAD, 0xBE, 0xEF] + Array(repeating: 0x0A, count: 12)] {
            let uuid = UUID(uuid: (raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
                                   raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]))
            #expect(ActivityIDs.format(raw) == uuid.uuidString)
        }
    }

    @Test("every change bumps the version; addUserInfoEntries merges")
    func versionAndMerge() throws {
        let activity = try UserActivity(activityType: "org.handoff.contacts.edit-contact")
        #expect(activity.version == 1)
        activity.title = "Editing"
        activity.userInfo = ["firstName": "Ada", "lastName": "Byron"]
        activity.addUserInfoEntries(from: ["lastName": "Lovelace", "phone": "+44"])
        #expect(activity.userInfo == ["firstName": "Ada", "lastName": "Lovelace", "phone": "+44"])
        #expect(activity.version == 4)
        #expect(!activity.isCurrent)
    }
}

@Suite("Becoming current", .exclusive)
struct BecomeCurrentTests {
    @Test("node.becomeCurrent of many activities: one call, all current and seen by the other node; one invalid makes none current")
    func batch() async throws {
        try await withTwoNodes { a, b in
            let activities = try (0..<500).map { index in
                let activity = try UserActivity(activityType: "org.handoff.test.batch")
                activity.title = "batch \(index)"
                return activity
            }
            try await a.becomeCurrent(activities)
            let allCurrent = activities.allSatisfy { $0.isCurrent }
            #expect(allCurrent)
            #expect(await eventually { await b.activities().filter { $0.activityType == "org.handoff.test.batch" }.count == 500 })

            let good = try UserActivity(activityType: "org.handoff.test.batch")
            let invalidated = try UserActivity(activityType: "org.handoff.test.batch")
            await invalidated.invalidate()
            do throws(HandoffError) {
                try await a.becomeCurrent([good, invalidated])
                Issue.record("a batch holding an invalidated activity must be refused")
            } catch {
                let code = error.code
                #expect(code == .invalidatedLocally)
            }
            #expect(!good.isCurrent)
            #expect(await a.currentActivities.count == 500)
        }
    }

    @Test("userInfo over the limit is refused with userInfoTooLarge; under it is accepted")
    func userInfoTooLarge() async throws {
        var configuration = testConfiguration("limits")
        configuration.maxUserInfoSize = 1024
        try await Node.withRunning(configuration) { node in
            let activity = try UserActivity(activityType: "org.handoff.contacts.list-contacts")
            activity.userInfo = ["blob": .bytes(Data(count: 2000))]
            do {
                try await activity.becomeCurrent(on: node)
                Issue.record("a 2 KB userInfo must be refused with a 1 KB limit")
            } catch let error as HandoffError {
                #expect(error.code == .userInfoTooLarge)
                #expect(error.code.appleErrorCode == 4611)
                #expect(error.message.contains("1024"))
            }
            #expect(!activity.isCurrent)
            activity.userInfo = ["blob": .bytes(Data(count: 900))]
            try await activity.becomeCurrent(on: node)
            #expect(activity.isCurrent)
        }
    }

    @Test("an advertisement over the contract's text limit is refused with messageTooLarge; one at the limit is sent")
    func advertisementTooLarge() async throws {
        try await Node.withRunning(testConfiguration("advert-limit")) { node in
            let type = "org.handoff.contacts.list-contacts"
            let activity = try UserActivity(activityType: type)
            activity.keywords = ["ada", "lovelace"]
            activity.title = String(repeating: "é", count: (WireLimits.maxAdvertisedText - type.utf8.count - 11) / 2 + 1)
            do {
                try await activity.becomeCurrent(on: node)
                Issue.record("a title that takes the advertisement past \(WireLimits.maxAdvertisedText) bytes must be refused")
            } catch let error as HandoffError {
                #expect(error.code == .messageTooLarge)
                #expect(error.message.contains("\(WireLimits.maxAdvertisedText)"), "\(error.message)")
            }
            #expect(!activity.isCurrent)
            activity.title = String(repeating: "e", count: WireLimits.maxAdvertisedText - type.utf8.count - 11)
            try await activity.becomeCurrent(on: node)
            #expect(activity.isCurrent)
        }
    }

    @Test("updatedAt is when it became current, or last changed while current; changes before it became current do not stamp it")
    func updatedAtStamps() async throws {
        try await Node.withRunning(testConfiguration("updated-at")) { node in
            let activity = try UserActivity(activityType: "org.handoff.contacts.list-contacts")
            activity.title = "set up before"
            try await Task.sleep(for: .milliseconds(30))
            let beforeCurrent = Date()
            try await activity.becomeCurrent(on: node)
            let origin = WireNodeRef()
            let stamped = activity.advertisement(origin: origin, continueEndpoint: "", lease: .seconds(6), defaultTeamID: nil).updatedAt!.date
            #expect(stamped >= beforeCurrent.addingTimeInterval(-0.001), "stamped \(stamped), before becoming current \(beforeCurrent): the set-up's time, not the moment it became current")
            try await Task.sleep(for: .milliseconds(30))
            let beforeChange = Date()
            activity.title = "changed while current"
            let changed = activity.wire(origin: origin, defaultTeamID: nil).updatedAt.date
            #expect(changed >= beforeChange.addingTimeInterval(-0.001), "a change while current did not stamp it")
            await activity.resignCurrent()
        }
    }

    @Test("the default limit is 3 KB")
    func defaultLimit() async throws {
        try await Node.withRunning(testConfiguration("default-limit")) { node in
            #expect(node.configuration.maxUserInfoSize == 3072)
            let activity = try UserActivity(activityType: "org.handoff.contacts.list-contacts")
            activity.userInfo = ["blob": .bytes(Data(count: 3100))]
            await #expect(throws: HandoffError.self) {
                try await activity.becomeCurrent(on: node)
            }
        }
    }

    @Test("a missing required key is refused, naming the key")
    func missingRequiredKey() async throws {
        try await Node.withRunning(testConfiguration("required")) { node in
            let activity = try UserActivity(activityType: "org.handoff.contacts.edit-contact")
            activity.requiredUserInfoKeys = ["firstName", "contactID"]
            activity.userInfo = ["firstName": "Ada"]
            do {
                try await activity.becomeCurrent(on: node)
                Issue.record("an activity without its required keys must not be advertised")
            } catch let error as HandoffError {
                #expect(error.code == .missingRequiredUserInfoKey)
                #expect(error.message.contains("\"contactID\""))
            }
            activity.addUserInfoEntries(from: ["contactID": "42"])
            try await activity.becomeCurrent(on: node)
        }
    }

    @Test("an invalidated activity cannot become current again; an expired one cannot either")
    func invalidatedAndExpired() async throws {
        try await Node.withRunning(testConfiguration("ended")) { node in
            let activity = try UserActivity(activityType: "org.handoff.contacts.view-contact")
            try await activity.becomeCurrent(on: node)
            await activity.invalidate()
            #expect(activity.isInvalidated && !activity.isCurrent)
            do {
                try await activity.becomeCurrent(on: node)
                Issue.record("invalidated activities must stay invalid")
            } catch let error as HandoffError {
                #expect(error.code == .invalidatedLocally)
            }
            let expired = try UserActivity(activityType: "org.handoff.contacts.view-contact")
            expired.expirationDate = Date(timeIntervalSinceNow: -1)
            do {
                try await expired.becomeCurrent(on: node)
                Issue.record("expired activities must not become current")
            } catch let error as HandoffError {
                #expect(error.code == .activityExpired)
            }
        }
    }
}
