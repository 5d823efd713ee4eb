import Foundation
import Handoff
import Synchronization
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
import HandoffTestSupport

/// More of the two-node suite: which activity is the newest, failing handlers, keywords, eligibility, shutdown.
extension ContinuationTests {
    @Test("the newest activity of a type follows its originators' clocks (updated_at), not the order this node heard of them")
    func newestByOriginClock() async throws {
        // A peer on the bus that this test speaks for: two origins, the newer heard of first.
        let context = try Context()
        let publisher = try context.socket(.xpub)
        defer { publisher.close() }
        try publisher.bind("tcp://127.0.0.1:*")
        let endpoint = try publisher.lastEndpoint
        try await Node.withRunning(testConfiguration("b", peers: [endpoint])) { b in
            // The node's subscription to activities has reached the publisher once it shows up
            // there. Its presence subscription may come first: advertising then, under load, lost
            // the advertisement to the publisher's filter (a CI run, 2026-12-03).
            var subscribed = false
            while !subscribed, let frame = try await publisher.receive(timeout: .seconds(5)) {
                subscribed = frame.bytes == [1] || frame.bytes.starts(with: [1] + Array("A:".utf8))
            }
            try #require(subscribed, "the node's subscription to activities never reached the publisher")
            func advertise(_ id: String, origin: String, updated: Date) throws {
                var advertisement = WireAdvertisement()
                advertisement.activityID = id
                advertisement.activityType = "org.handoff.test.newest"
                advertisement.title = id
                advertisement.origin.nodeID = origin
                advertisement.origin.name = origin
                advertisement.continueEndpoint = "tcp://127.0.0.1:9"
                advertisement.version = 1
                advertisement.leaseMs = 60_000
                advertisement.updatedAt = WireTimestamp(updated)
                let bytes: [UInt8] = try WireEnvelope(body: .advertisement(advertisement), sender: advertisement.origin, sequence: 1).serializedBytes()
                _ = try publisher.trySend(Array("A:org.handoff.test.newest".utf8), more: true)
                _ = try publisher.trySend(bytes)
            }
            try advertise("made-current-last", origin: "n1", updated: Date())
            _ = try await discovered("made-current-last", on: b)
            try advertise("made-current-first", origin: "n2", updated: Date() - 30)
            _ = try await discovered("made-current-first", on: b)
            #expect(await b.newestActivity(ofType: "org.handoff.test.newest")?.id == "made-current-last")
        }
    }

    @Test("the newest activity of a type is the one that changed last, not the one with the highest version")
    func newestOfType() async throws {
        try await withTwoNodes { a, b in
            var activities: [UserActivity] = []
            for index in 0..<3 {
                let activity = try UserActivity(activityType: "org.handoff.contacts.edit-contact")
                activity.title = "Draft \(index)"
                try await activity.becomeCurrent(on: a)
                _ = try await discovered(activity.id, on: b)
                activities.append(activity)
            }
            // The first has the highest version (changed twice), but the last appeared after it.
            activities[0].title = "Draft 0, edited"
            activities[0].title = "Draft 0, edited again"
            #expect(await eventually { await b.activities().first { $0.id == activities[0].id }?.title == "Draft 0, edited again" })
            activities[2].title = "Draft 2, edited"
            #expect(await eventually { await b.newestActivity(ofType: "org.handoff.contacts.edit-contact")?.id == activities[2].id })
            await b.setContinuationHandler(forType: "org.handoff.contacts.edit-contact") { _ in }
            guard case .restored(let continued) = try await b.continueActivity(type: "org.handoff.contacts.edit-contact") else {
                Issue.record("not restored")
                return
            }
            #expect(continued.id == activities[2].id)
        }
    }

    @Test("a continuation handler that throws: handoffFailed, with the handler's own error as its cause; did-fail is told")
    func handlerFailure() async throws {
        struct DraftRejected: Error, Equatable { let field: String }
        try await withTwoNodes { a, b in
            let activity = try UserActivity(activityType: editContact)
            try await activity.becomeCurrent(on: a)
            let found = try await discovered(activity.id, on: b)
            let continuer = Recorder()
            await b.setDelegate(continuer)
            await b.setContinuationHandler(forType: editContact) { _ in throw DraftRejected(field: "email") }
            let failure = await #expect(throws: HandoffError.self) { try await b.continueActivity(found) }
            #expect(failure?.code == .handoffFailed)
            #expect(failure?.cause as? DraftRejected == DraftRejected(field: "email"))
            #expect(failure?.message.contains("DraftRejected") == true)
            #expect(continuer.log.last?.hasPrefix("didFail \(editContact)") == true)
            // The cause is not part of the error's identity.
            #expect(failure == HandoffError(.handoffFailed, failure?.message ?? "", activityType: editContact))
        }
    }

    @Test("discovery by search keywords: any of them, whatever the case")
    func keywords() async throws {
        try await withTwoNodes { a, b in
            let ada = try UserActivity(activityType: "org.handoff.contacts.view-contact")
            ada.keywords = ["Ada", "Lovelace", "analytical engine"]
            let alan = try UserActivity(activityType: "org.handoff.contacts.view-contact")
            alan.keywords = ["Alan", "Turing"]
            try await ada.becomeCurrent(on: a)
            try await alan.becomeCurrent(on: a)
            _ = try await discovered(alan.id, on: b)
            _ = try await discovered(ada.id, on: b)
            #expect(await b.activities(matching: .keywords(["lovelace"])).map(\.id) == [ada.id])
            #expect(Set(await b.activities(matching: .keywords(["turing", "ADA"])).map(\.id)) == [ada.id, alan.id])
            #expect(await b.activities(matching: .keywords(["hopper"])).isEmpty)
            // A discovery stream filtered the same way hears only what matches.
            let engines = await b.discover(.keywords(["analytical engine"]))
            let first = await firstEvent(in: engines, within: .seconds(10)) { _ in true }
            #expect(first?.activity.id == ada.id)
        }
    }

    @Test("an activity made ineligible for Handoff is not continued, even by a node that still knows it")
    func ineligibleIsNotContinued() async throws {
        try await withTwoNodes { a, b in
            let activity = try UserActivity(activityType: "org.handoff.contacts.edit-contact")
            try await activity.becomeCurrent(on: a)
            let found = try await discovered(activity.id, on: b)
            await b.setContinuationHandler(forType: activity.activityType) { _ in }
            activity.isEligibleForHandoff = false
            let refusal = await #expect(throws: HandoffError.self) { try await b.continueActivity(found) }
            #expect(refusal?.code == .activityNotFound)
            #expect(refusal?.message.contains("eligibleForHandoff") == true)
        }
    }

    @Test("a node shutting down withdraws its activities at once")
    func shutdownWithdraws() async throws {
        // A one-minute lease: only a withdrawal can explain a quick removal.
        let a = try Node(configuration: testConfiguration("leaving", interval: .seconds(20)))
        let runA = Task { try await a.run() }
        await a.untilRunning()
        try await Node.withRunning(testConfiguration("observer", peers: [a.busEndpoint!])) { observer in
            let seen = await observer.discover()
            let activity = try UserActivity(activityType: viewContact)
            try await activity.becomeCurrent(on: a)
            let activityID = activity.id
            let appeared = await firstEvent(in: seen) { $0.activity.id == activityID }
            #expect(appeared != nil)
            runA.cancel()
            let gone = await firstEvent(in: seen, within: .seconds(10)) { if case .removed(_, .nodeShutdown) = $0 { true } else { false } }
            #expect(gone?.activity.id == activityID)
        }
    }
}
