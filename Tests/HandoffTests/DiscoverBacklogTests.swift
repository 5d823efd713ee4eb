import Foundation
import Handoff
import Testing

@Suite("Discover streams: bounded for a reader that falls behind")
struct DiscoverBacklogTests {
    /// Every event of `events` until it ends, or `nil` when it has not ended within `timeout`.
    private static func untilEnd(of events: AsyncStream<ActivityEvent>, within timeout: Duration = .seconds(5)) async -> [ActivityEvent]? {
        await within(timeout) {
            var all: [ActivityEvent] = []
            for await event in events { all.append(event) }
            return all
        }
    }

    @Test("a reader more than maxDiscoverBacklog events behind gets the events held, in order, then its stream ends; discovering again lists every activity known, and the node goes on")
    func overrunEndsTheStreamAfterWhatItHolds() async throws {
        // A's activities are leased for 30 s, not the tests' 600 ms: the stream must hold appearances
        // only, and under a loaded parallel pass a stall of 600 ms had B lose Contact 0 and learn it
        // again (appeared, removed, appeared) before anything else.
        try await withTwoNodes(configureA: { $0.lease = .seconds(30) }, configureB: { $0.maxDiscoverBacklog = 20 }) { a, b in
            let contacts = ActivityFilter.type(prefix: "org.handoff.contacts.")
            let stalled = await b.discover(contacts)
            _ = try await viewContacts(1, currentOn: a)
            #expect(await eventually { await b.activities(matching: contacts).count == 1 })
            for index in 1..<60 {
                let activity = try UserActivity(activityType: "org.handoff.contacts.view-contact")
                activity.title = "Contact \(index)"
                try await activity.becomeCurrent(on: a)
            }
            #expect(await eventually { await b.activities(matching: contacts).count == 60 })

            // Nothing was read: the stream holds the first 20 (its backlog; nothing was known when it
            // began) and ends there, rather than skipping to later ones or holding all 60.
            let held = try #require(await Self.untilEnd(of: stalled), "the overrun stream did not end")
            #expect(held.map(\.activity.title) == (0..<20).map { "Contact \($0)" })
            #expect(held.allSatisfy { if case .appeared = $0 { true } else { false } })
            #expect(await !b.hasStopped, "the stream ended with its node still running: the reader fell behind")

            // A new stream starts over from what the node knows, whatever the backlog.
            let again = await b.discover(contacts)
            var listed: Set<String> = []
            for await event in again {
                listed.insert(event.activity.title)
                if listed.count == 60 { break }
            }
            #expect(listed == Set((0..<60).map { "Contact \($0)" }))
            let later = try UserActivity(activityType: "org.handoff.contacts.view-contact")
            later.title = "Later"
            try await later.becomeCurrent(on: a)
            let seen = await firstEvent(in: await b.discover(contacts)) { $0.activity.id == later.id }
            #expect(seen != nil)
        }
    }

    @Test("a stream ends when its node stops, and hasStopped says so; it is false while the node runs")
    func aStoppedNodeEndsItsStreams() async throws {
        let node = try Node(configuration: testConfiguration("stopping"))
        #expect(await !node.hasStopped)
        let run = Task { try await node.run() }
        await node.untilRunning()
        let events = await node.discover()
        #expect(await !node.hasStopped)
        run.cancel()
        _ = try? await run.value
        #expect(await Self.untilEnd(of: events) != nil, "the stream did not end with its node")
        #expect(await node.hasStopped)
    }
}
