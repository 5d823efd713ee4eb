import Foundation
import Handoff
import Synchronization
import HandoffWire
import SwiftProtobuf
import Testing
@testable import ZeroMQ
import HandoffTestSupport

/// The contacts types the two-node tests continue (ContinuationTests+Rules.swift too).
let editContact = "org.handoff.contacts.edit-contact"
let viewContact = "org.handoff.contacts.view-contact"

@Suite("Discovery and continuation between two nodes", .exclusive)
struct ContinuationTests {
    @Test("B discovers A's activity and continues it with every userInfo value intact; A hears who continued")
    func continueEveryValue() async throws {
        // B's handlers are of the activity's team (the default team policy hands activities only to
        // handlers of their own team).
        try await withTwoNodes(configureB: { $0.teamID = "TEAM42" }) { a, b in
            let originator = Recorder()
            let continuer = Recorder()
            await b.setDelegate(continuer)
            let restored = Mutex<ContinuedActivity?>(nil)
            await b.setContinuationHandler(forType: editContact) { activity in restored.withLock { $0 = activity } }

            let activity = try UserActivity(activityType: editContact)
            activity.title = "Editing Ada Lovelace"
            activity.userInfo = everyKindOfUserInfo
            activity.requiredUserInfoKeys = ["string", "map"]
            activity.webpageURL = URL(string: "https://contacts.example.org/ada")
            activity.keywords = ["contact", "ada"]
            activity.teamID = "TEAM42"
            activity.delegate = originator
            try await activity.becomeCurrent(on: a)

            let found = try await discovered(activity.id, on: b)
            #expect(found.title == "Editing Ada Lovelace")
            #expect(found.origin.name == "node-a")
            #expect(found.keywords == ["ada", "contact"])

            let result = try await b.continueActivity(found)
            guard case .restored(let continued) = result else {
                Issue.record("expected a restored activity, got \(result)")
                return
            }
            #expect(continued.userInfo == everyKindOfUserInfo)
            #expect(restored.withLock { $0 } == continued)
            #expect(continued.id == activity.id)
            #expect(continued.requiredUserInfoKeys == ["string", "map"])
            #expect(continued.webpageURL == activity.webpageURL)
            #expect(continued.teamID == "TEAM42")
            #expect(continued.origin.id == a.id)
            #expect(continuer.log == ["willContinue \(editContact)"])
            #expect(await eventually { originator.log.contains("wasContinued by node-b") })
            // Apple's default: continued as often as asked.
            _ = try await b.continueActivity(found)
            #expect(await eventually { originator.log.filter { $0.hasPrefix("wasContinued") }.count == 2 })
        }
    }

    @Test("needsSave runs will-save right before the state is sent, once")
    func willSaveRefreshesLazily() async throws {
        try await withTwoNodes { a, b in
            let originator = Recorder(willSave: { activity in activity.addUserInfoEntries(from: ["draft": "fresh from will-save"]) })
            let activity = try UserActivity(activityType: editContact)
            activity.userInfo = ["draft": "stale"]
            activity.delegate = originator
            try await activity.becomeCurrent(on: a)
            activity.needsSave = true
            await b.setContinuationHandler(forType: editContact) { _ in }
            let found = try await discovered(activity.id, on: b)
            guard case .restored(let continued) = try await b.continueActivity(found) else { throw CancellationError() }
            #expect(continued.userInfo["draft"] == "fresh from will-save")
            #expect(!activity.needsSave)
            _ = try await b.continueActivity(found)
            #expect(originator.log.filter { $0 == "willSave" }.count == 1)
        }
    }

    @Test("no handler: noHandler and did-fail; with a webpage URL, the URL instead")
    func noHandlerAndWebpageFallback() async throws {
        try await withTwoNodes { a, b in
            let continuer = Recorder()
            await b.setDelegate(continuer)
            let plain = try UserActivity(activityType: viewContact)
            try await plain.becomeCurrent(on: a)
            let withURL = try UserActivity(activityType: "org.handoff.notes.view-note")
            withURL.webpageURL = URL(string: "https://notes.example.org/n/7")
            try await withURL.becomeCurrent(on: a)

            let foundPlain = try await discovered(plain.id, on: b)
            do {
                _ = try await b.continueActivity(foundPlain)
                Issue.record("continuing without a handler must fail")
            } catch let error as HandoffError {
                #expect(error.code == .noHandler)
                #expect(error.activityType == viewContact)
            }
            #expect(continuer.log.contains("didFail \(viewContact) no handler"))

            let foundURL = try await discovered(withURL.id, on: b)
            #expect(try await b.continueActivity(foundURL) == .webpage(URL(string: "https://notes.example.org/n/7")!))
        }
    }

    @Test("a delegate that declines stops the continuation")
    func declined() async throws {
        try await withTwoNodes { a, b in
            let continuer = Recorder(decline: true)
            await b.setDelegate(continuer)
            await b.setContinuationHandler(forType: editContact) { _ in Issue.record("the handler must not run") }
            let activity = try UserActivity(activityType: editContact)
            try await activity.becomeCurrent(on: a)
            let found = try await discovered(activity.id, on: b)
            await #expect(throws: HandoffError.self) { try await b.continueActivity(found) }
            #expect(continuer.log.last == "didFail \(editContact) declined")
        }
    }

    @Test("an originator that does not answer in time gives remoteApplicationTimedOut", .exclusive(.alone)) // ReplyPolling counts every continue in the process
    func remoteTimedOut() async throws {
        try await withTwoNodes(configureB: { $0.continueTimeout = .milliseconds(400) }) { a, b in
            let slow = Recorder(willSave: { _ in try? await Task.sleep(for: .seconds(3)) })
            let activity = try UserActivity(activityType: editContact)
            activity.delegate = slow
            activity.needsSave = true
            try await activity.becomeCurrent(on: a)
            let continuer = Recorder()
            await b.setDelegate(continuer)
            await b.setContinuationHandler(forType: editContact) { _ in }
            let found = try await discovered(activity.id, on: b)
            let probe = StallProbe.start(alsoOn: EventLoops.shared), started = ContinuousClock.now
            do {
                _ = try await b.continueActivity(found)
                Issue.record("a silent originator must time out")
            } catch let error as HandoffError {
                #expect(error.code == .remoteApplicationTimedOut)
                #expect(error.code.appleErrorCode == 4610)
            }
            let waited = ContinuousClock.now - started, held = probe.stop()
            #expect(waited >= .milliseconds(350) && waited < .seconds(2) + held, "timed out after \(waited), the loops held back \(held)")
            #expect(continuer.log.last == "didFail \(editContact) remote application timed out")
            #expect(ReadinessWatcher.shared.replyPolling.awaitedCount == 0, "a continue that timed out still counts its reply awaited: loops would poll after every later request")
        }
    }

    @Test("invalidated, once-only and oversized activities are refused by the originator with the right error")
    func refusedByOriginator() async throws {
        try await withTwoNodes(configureA: { $0.maxUserInfoSize = 512 }) { a, b in
            await b.setContinuationHandler(forType: editContact) { _ in }
            let events = await b.discover(.type(prefix: "org.handoff.contacts."))

            let invalidated = try UserActivity(activityType: editContact)
            try await invalidated.becomeCurrent(on: a)
            let foundInvalidated = try await discovered(invalidated.id, on: b)
            await invalidated.invalidate()
            let invalidatedID = invalidated.id
            let removal = await firstEvent(in: events) { if case .removed(let gone, .invalidated) = $0 { gone.id == invalidatedID } else { false } }
            #expect(removal != nil)
            await #expect(throws: HandoffError.self) { try await b.continueActivity(foundInvalidated) }
            do { _ = try await b.continueActivity(foundInvalidated) } catch let error as HandoffError { #expect(error.code == .activityInvalidated) }

            let once = try UserActivity(activityType: editContact)
            once.continuationPolicy = .once
            try await once.becomeCurrent(on: a)
            let foundOnce = try await discovered(once.id, on: b)
            _ = try await b.continueActivity(foundOnce)
            do {
                _ = try await b.continueActivity(foundOnce)
                Issue.record("a continue-once activity must not be continued twice")
            } catch let error as HandoffError {
                #expect(error.code == .alreadyContinued)
            }
            #expect(once.isInvalidated)

            // Wanting streams of a continue-once activity without them: refused before it is handed
            // over, so it is still there for a continue that wants none.
            let onceMore = try UserActivity(activityType: editContact)
            onceMore.continuationPolicy = .once
            try await onceMore.becomeCurrent(on: a)
            let foundOnceMore = try await discovered(onceMore.id, on: b)
            do {
                _ = try await b.continueActivity(foundOnceMore, wantingStreams: true)
                Issue.record("an activity without streams was handed to a continue that wants them")
            } catch let error as HandoffError {
                #expect(error.code == .streamsNotSupported)
            }
            #expect(!onceMore.isInvalidated)
            #expect(try await b.continueActivity(foundOnceMore).restored != nil)
            #expect(await eventually { onceMore.isInvalidated })

            let growing = try UserActivity(activityType: editContact)
            try await growing.becomeCurrent(on: a)
            let foundGrowing = try await discovered(growing.id, on: b)
            growing.userInfo = ["notes": .string(String(repeating: "x", count: 600))]
            do {
                _ = try await b.continueActivity(foundGrowing)
                Issue.record("an activity whose userInfo grew past the limit must be refused")
            } catch let error as HandoffError {
                #expect(error.code == .userInfoTooLarge)
            }
        }
    }

    @Test("unknown ids, expired activities and a vanished originator fail with their own errors")
    func localFailures() async throws {
        try await withTwoNodes { a, b in
            await b.setContinuationHandler(forType: editContact) { _ in }
            do {
                _ = try await b.continueActivity(id: "no-such-activity")
                Issue.record("an unknown id must fail")
            } catch let error as HandoffError {
                #expect(error.code == .activityNotFound)
            }

            let expiring = try UserActivity(activityType: editContact)
            // Found before it expires (0.6 s need not be enough on a loaded machine), continued after.
            expiring.expirationDate = Date(timeIntervalSinceNow: 3)
            try await expiring.becomeCurrent(on: a)
            let foundExpiring = try await discovered(expiring.id, on: b)
            try await Task.sleep(for: .seconds(max(0, expiring.expirationDate!.timeIntervalSinceNow) + 0.1))
            let expired = await #expect(throws: HandoffError.self, "an expired activity must not be continued") { _ = try await b.continueActivity(foundExpiring) }
            #expect(expired?.code == .activityExpired)
            #expect(await eventually { await b.activities().allSatisfy { $0.id != expiring.id } })
        }

        // An originator that is gone: the discovered activity points at a dead endpoint.
        var stale: DiscoveredActivity?
        try await withTwoNodes { a, b in
            let activity = try UserActivity(activityType: editContact)
            try await activity.becomeCurrent(on: a)
            stale = try await discovered(activity.id, on: b)
        }
        let found = try #require(stale)
        try await Node.withRunning(testConfiguration("node-c")) { c in
            await c.setContinuationHandler(forType: editContact) { _ in }
            // Given up within a second, plus what the machine held the loops back (CI, 2026-12-07: 2.8 s).
            let probe = StallProbe.start(alsoOn: EventLoops.shared)
            let started = ContinuousClock.now
            do {
                _ = try await c.continueActivity(found)
                Issue.record("continuing from a vanished node must fail")
            } catch let error as HandoffError {
                #expect(error.code == .connectionUnavailable)
                #expect(error.code.appleErrorCode == 4609)
            }
            let failedAfter = ContinuousClock.now - started, held = probe.stop()
            #expect(failedAfter < .seconds(2) + held, "failed after \(failedAfter), the loops held back \(held)")
        }
    }

    /// An edit-contact draft ("v1") made current on `a` and continued by `b`, in up to `attempts` tries.
    private func continuedDraft(from a: Node, by b: Node, originator: Recorder, continuer: Recorder, attempts: Int = 1) async throws -> UserActivity {
        await b.setDelegate(continuer)
        await b.setContinuationHandler(forType: editContact) { _ in }
        let activity = try UserActivity(activityType: editContact)
        activity.userInfo = ["draft": "v1"]
        activity.delegate = originator
        try await activity.becomeCurrent(on: a)
        for attempt in 1...attempts {
            do { _ = try await b.continueActivity(try await discovered(activity.id, on: b)); break } catch {
                if (error as? HandoffError)?.code != .remoteApplicationTimedOut || attempt == attempts { throw error }
            }
        }
        return activity
    }

    @Test("did-update: the continuing node hears of the originator's changes, with the new state")
    func didUpdate() async throws {
        try await withTwoNodes { a, b in
            let originator = Recorder()
            let continuer = Recorder()
            let activity = try await continuedDraft(from: a, by: b, originator: originator, continuer: continuer)
            activity.userInfo = ["draft": "second draft"]
            #expect(await eventually { continuer.log.contains { $0.hasPrefix("didUpdate") && $0.hasSuffix("second draft") } })
            // A refresh is not a new continuation.
            #expect(originator.log.filter { $0.hasPrefix("wasContinued") }.count == 1)
        }
    }

    @Test("did-update over real sockets: a refresh that times out (the originator's will-save outlasts the continuer's timeout) is tried again a second later and brings the saved state")
    func didUpdateRetriedAfterTimeout() async throws {
        let slowSaves = Mutex(1)
        let originator = Recorder(willSave: { activity in
            // The first will-save outlasts the continuer's 500 ms timeout; later ones are quick.
            let slow = slowSaves.withLock { count in
                defer { count = max(0, count - 1) }
                return count > 0
            }
            if slow { try? await Task.sleep(for: .milliseconds(1_000)) }
            activity.userInfo = ["draft": "saved draft"]
        })
        let continuer = Recorder()
        try await withTwoNodes(configureB: { $0.continueTimeout = .milliseconds(500) }) { a, b in
            let activity = try await continuedDraft(from: a, by: b, originator: originator, continuer: continuer, attempts: 3)
            let changed = ContinuousClock.now
            // Marked first, as an app marks it when its user types: set the other way round, the
            // change alone was advertised, and a refresh could fetch it before the mark was set
            // (this thread preempted between the two lines while the nodes' loops ran on).
            activity.needsSave = true
            activity.userInfo = ["draft": "typed, not saved"]
            #expect(await eventually(within: .seconds(8)) { continuer.log.contains { $0.hasPrefix("didUpdate") && $0.hasSuffix("saved draft") } },
                    "\(continuer.log) \(originator.log)")
            // Not before the timed-out fetch (500 ms) and the retry's delay (1 s).
            #expect(ContinuousClock.now - changed >= .milliseconds(1_400))
            #expect(originator.log.filter { $0 == "willSave" }.count >= 1)
            #expect(!continuer.log.contains { $0.hasPrefix("didUpdate") && $0.hasSuffix("typed, not saved") })
        }
    }

    @Test("did-update over real sockets: a newer version advertised while the continue was under way (here, while its handler ran, before the node held the activity) is fetched and told once it is held")
    func didUpdateHeardBeforeHeld() async throws {
        try await withTwoNodes { a, b in
            let continuer = Recorder()
            await b.setDelegate(continuer)
            let activity = try UserActivity(activityType: editContact)
            activity.userInfo = ["draft": "v1"]
            try await activity.becomeCurrent(on: a)
            let first = try await discovered(activity.id, on: b)
            let id = activity.id
            await b.setContinuationHandler(forType: editContact) { _ in
                // The originator changes it, and this node hears the newer version, before the
                // continue ends and the node holds the activity: no fetch can start then.
                activity.userInfo = ["draft": "changed during the continue"]
                #expect(await eventually { await b.activities().first { $0.id == id }.map { $0.version > first.version } ?? false }, "not heard before the hold")
            }
            _ = try await b.continueActivity(first)
            #expect(await eventually { continuer.log.contains { $0.hasPrefix("didUpdate") && $0.hasSuffix("changed during the continue") } },
                    "\(continuer.log)")
        }
    }

    @Test("discovery filters by type prefix and by node, and reports resignation")
    func discoveryFilters() async throws {
        try await withTwoNodes { a, b in
            let contacts = await b.discover(.type(prefix: "org.handoff.contacts."))
            let fromA = await b.discover(.node(a.id))
            let note = try UserActivity(activityType: "org.handoff.notes.edit-note")
            try await note.becomeCurrent(on: a)
            let contact = try UserActivity(activityType: viewContact)
            try await contact.becomeCurrent(on: a)

            let firstContact = await firstEvent(in: contacts) { _ in true }
            #expect(firstContact?.activity.id == contact.id)
            let noteID = note.id
            let fromNode = await firstEvent(in: fromA) { $0.activity.id == noteID }
            #expect(fromNode != nil)

            contact.title = "Viewing Ada"
            let updated = await firstEvent(in: contacts) { if case .updated = $0 { true } else { false } }
            #expect(updated?.activity.title == "Viewing Ada")

            await contact.resignCurrent()
            let removed = await firstEvent(in: contacts) { if case .removed(_, .resigned) = $0 { true } else { false } }
            #expect(removed?.activity.id == contact.id)
        }
    }

    @Test("a late joiner's snapshot holds the current activities at once; nobody else hears it")
    func lateJoinerDirect() async throws {
        try await Node.withRunning(testConfiguration("node-a", interval: .seconds(60))) { a in
            let activities = try await viewContacts(20, currentOn: a)
            try await Task.sleep(for: .milliseconds(100))
            let (started, probe) = (ContinuousClock.now, StallProbe.start(alsoOn: EventLoops.shared))
            try await Node.withRunning(testConfiguration("late", peers: [a.busEndpoint!], interval: .seconds(60))) { late in
                let ids = Set(activities.map(\.id))
                #expect(await synchronized(late, within: .seconds(2), allowingFor: probe))
                #expect(Set(await late.activities().map(\.id)) == ids, "the snapshot alone holds them all")
                // A later joiner's snapshot goes to it alone: the first joiner hears nothing again.
                try await Node.withRunning(testConfiguration("later", peers: [a.busEndpoint!], interval: .seconds(60))) { later in
                    #expect(await synchronized(later, within: .seconds(2), allowingFor: probe))
                    #expect(Set(await later.activities().map(\.id)) == ids)
                }
                #expect(await late.securityCounters.replayedIgnored == 0)
            }
            let took = ContinuousClock.now - started, stall = probe.stop()  // plus what the machine held back
            #expect(took < .seconds(2) + stall, "took \(took) (stalled \(stall))")
        }
    }

    @Test("a node keeps track of at most its quota of another node's activities, and counts the rest")
    func knownQuota() async throws {
        try await withTwoNodes(configureA: { $0.refreshInterval = .milliseconds(300) }, configureB: { $0.maxKnownActivitiesPerNode = 5 }) { a, b in
            let activities = try await viewContacts(8, currentOn: a)
            #expect(await eventually { await b.securityCounters.overQuotaIgnored >= 3 })
            #expect(await b.activities().count == 5)
            // Room made by a withdrawal is taken by one of the others at its next refresh.
            let known = Set(await b.activities().map(\.id))
            let leaving = try #require(activities.first { known.contains($0.id) })
            await leaving.invalidate()
            let refilled = await eventually {
                let ids = Set(await b.activities().map(\.id))
                return ids.count == 5 && !ids.contains(leaving.id)
            }
            #expect(refilled)
        }
    }
}
