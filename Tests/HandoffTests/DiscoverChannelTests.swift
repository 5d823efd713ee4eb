import Foundation
import HandoffWire
import Synchronization
import Testing

@testable import Handoff

/// The channel behind each discover stream, without a node: it must keep the contract of the
/// `AsyncStream` (buffering the oldest) it replaced.
@Suite("Discover channel: a discover stream's queue, with the AsyncStream contract it replaced")
struct DiscoverChannelTests {
    static func event(_ title: String) -> ActivityEvent {
        var advertisement = WireAdvertisement()
        advertisement.activityID = title
        advertisement.activityType = "org.handoff.test.channel"
        advertisement.title = title
        advertisement.origin.nodeID = "node-a"
        advertisement.version = 1
        return .appeared(DiscoveredActivity(wire: advertisement))
    }

    /// Counts the channel's terminations.
    final class Terminations: Sendable {
        private let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
        func add() { count.withLock { $0 += 1 } }
    }

    @Test("events yielded before reading come out in order; past its capacity an event is dropped and reported so")
    func ordersAndBounds() async {
        let channel = DiscoverChannel(capacity: 3)
        let stream = channel.stream()
        let yielded = ["a", "b", "c", "d"].map { channel.yield(Self.event($0)) }
        #expect(yielded == [.enqueued, .enqueued, .enqueued, .dropped])
        channel.finish()
        var titles: [String] = []
        for await event in stream { titles.append(event.activity.title) }
        #expect(titles == ["a", "b", "c"])
    }

    @Test("finish ends the stream after the events queued, and an event after it is refused as terminated")
    func finishDeliversWhatIsQueued() async {
        let channel = DiscoverChannel(capacity: 8)
        let stream = channel.stream()
        channel.yield(Self.event("a"))
        channel.finish()
        #expect(channel.yield(Self.event("late")) == .terminated)
        var iterator = stream.makeAsyncIterator()
        #expect(await iterator.next()?.activity.title == "a")
        let end = await iterator.next()
        #expect(end == nil)
        let again = await iterator.next()
        #expect(again == nil)
    }

    @Test("a reader waiting on an empty queue gets the next event yielded, and finish wakes it with the end")
    func waitingReaderIsResumed() async throws {
        // Room for every event: whether the reader keeps up depends on the scheduler (a loaded CI
        // run once left it unscheduled through a burst of 7 into a queue of 8, which dropped 5);
        // dropping past the capacity is the first test's.
        let channel = DiscoverChannel(capacity: 256)
        let stream = channel.stream()
        let reader = Task {
            var titles: [String] = []
            for await event in stream { titles.append(event.activity.title) }
            return titles
        }
        // Each yield may find the reader waiting or not yet there; both paths must deliver.
        for index in 0..<200 {
            #expect(channel.yield(Self.event("\(index)")) == .enqueued)
            if index % 7 == 0 { try await Task.sleep(for: .milliseconds(1)) }
        }
        channel.finish()
        let titles = await reader.value
        #expect(titles == (0..<200).map(String.init))
    }

    @Test("a cancelled reader gets the end at once, what is queued is dropped, and the termination is said once")
    func cancelEndsTheStream() async throws {
        let channel = DiscoverChannel(capacity: 8)
        let terminations = Terminations()
        channel.onTermination { terminations.add() }
        let stream = channel.stream()
        let started = Mutex(false)
        let reader = Task {
            var count = 0
            for await _ in stream {
                count += 1
                started.withLock { $0 = true }
            }
            return count
        }
        channel.yield(Self.event("first"))
        try #require(await eventually { started.withLock { $0 } })
        reader.cancel()
        let count = await reader.value
        #expect(count == 1)
        #expect(terminations.value == 1)
        #expect(channel.yield(Self.event("after")) == .terminated)
        channel.finish()
        #expect(terminations.value == 1)
    }

    @Test("releasing every copy of the stream unread says the reader is gone, once; a termination handler set after it runs at once")
    func releasedStreamTerminates() async {
        let channel = DiscoverChannel(capacity: 8)
        let terminations = Terminations()
        channel.onTermination { terminations.add() }
        do {
            let stream = channel.stream()
            let copy = stream
            withExtendedLifetime((stream, copy)) {
                channel.yield(Self.event("unread"))
                #expect(terminations.value == 0)
            }
        }
        #expect(terminations.value == 1)
        #expect(channel.yield(Self.event("after")) == .terminated)

        let late = Terminations()
        channel.onTermination { late.add() }
        #expect(late.value == 1)
        #expect(terminations.value == 1)
    }
}
