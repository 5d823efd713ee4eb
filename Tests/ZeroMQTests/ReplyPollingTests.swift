import Foundation
import Synchronization
import Testing
@testable import ZeroMQ
import HandoffTestSupport

@Suite("Polling for an awaited reply instead of sleeping")
struct ReplyPollingTests {
    @Test("a loop polls only while a reply is awaited and within the window its asker gave")
    func pollsWhileAwaitedWithinItsWindow() {
        let polling = ReplyPolling()
        #expect(!polling.wanted(now: 0), "nothing awaited")
        polling.begin(until: 11_000)
        #expect(polling.wanted(now: 10_999))
        #expect(!polling.wanted(now: 11_000), "the window is over: a reply that never comes stops nobody's loop")
        #expect(!polling.claim(now: 11_000))
        polling.end()
        #expect(!polling.wanted(now: 10_500), "the reply came")
    }

    @Test("several replies awaited: the latest window holds, and polling stops when the last reply comes")
    func latestWindowAndLastReply() {
        let polling = ReplyPolling()
        polling.begin(until: 1_000)
        polling.begin(until: 600)
        #expect(polling.wanted(now: 900), "a later, shorter request does not cut the earlier one's window")
        polling.end()
        #expect(polling.wanted(now: 900), "one reply is still awaited")
        polling.end()
        #expect(!polling.wanted(now: 900))
    }

    @Test("one loop polls at a time; the others sleep")
    func oneLoopPollsAtATime() {
        let polling = ReplyPolling()
        polling.begin(until: 1_000)
        #expect(polling.claim(now: 10))
        #expect(!polling.claim(now: 10), "a second loop sleeps while the first polls")
        polling.release()
        #expect(polling.claim(now: 20))
        #expect(polling.pollsBegun.load(ordering: .relaxed) == 2)
    }

    @Test("a zero window asks for no polling")
    func zeroWindowDoesNothing() {
        let awaited = EventLoops.awaitReply(within: .zero)
        #expect(awaited.polling == nil)
        awaited.end()
    }
}

@Suite("The event loops while a reply is awaited", .exclusive)
struct LoopsPollingForAReplyTests {
    @Test("an idle loop polls while a reply is awaited, and stops when it comes")
    func idleLoopPollsUntilTheReply() async throws {
        let polling = ReadinessWatcher.shared.replyPolling
        let before = polling.pollsBegun.load(ordering: .relaxed)
        let awaited = EventLoops.awaitReply(within: .seconds(10))
        // A loop polls once it has nothing to run; tests beside this one (the protocol machines,
        // the simulator) may keep the loops busy a while. One may be polling already (for a reply
        // an earlier test awaited, its window still open): it polls on for this one.
        var started = false
        for _ in 0..<6_000 where !started {
            try await Task.sleep(for: .milliseconds(5))
            started = polling.isPolling || polling.pollsBegun.load(ordering: .relaxed) > before
        }
        // What the loops' polling state was, for a failure to say why no loop polled.
        let state = "awaited \(polling.awaitedCount), wanted \(polling.wanted(now: monotonicNanoseconds())), polling \(polling.isPolling), polls begun \(polling.pollsBegun.load(ordering: .relaxed) - before) since the request"
        awaited.end()
        #expect(started, "no loop polled within 30 s of the request (\(state))")
        var stopped = false
        for _ in 0..<200 where !stopped {
            try await Task.sleep(for: .milliseconds(5))
            stopped = !polling.isPolling
        }
        #expect(stopped, "the loop still polled a second after the reply came (its window ran 10 s)")
    }

    @Test("while a loop polls, a message arrives and a receive's deadline passes on time")
    func messagesAndDeadlinesWhilePolling() async throws {
        let awaited = EventLoops.awaitReply(within: .seconds(10))
        defer { awaited.end() }
        let pair = try DealerToRouter()
        try await pair.dealer.send(Array("the reply".utf8))
        let frames = try await pair.router.receiveMultipart()
        #expect(strings(frames).last == "the reply")
        // The connection is up and quiet now: nothing but the deadline can end the wait. What
        // the loaded machine held threads back by is allowed on top (a stall probe's). Up to three
        // tries: polling that keeps the loop past the deadline does so every time, where the one
        // loop of a one-loop pass, running every node of the tests beside this one, was once 6 s
        // behind its jobs while threads were held back by 0.04 s (2026-12-06, at the pass's start).
        var tries: [String] = []
        for _ in 0..<3 {
            let probe = StallProbe.start()
            let started = ContinuousClock.now
            let nothing = try await pair.router.receive(timeout: .milliseconds(50))
            let waited = ContinuousClock.now - started
            let stall = probe.stop()
            #expect(nothing == nil)
            #expect(waited >= .milliseconds(45), "a 50 ms receive returned after \(waited)")
            if waited < .seconds(3) + stall { break }
            tries.append("\(waited) (threads held back by \(stall))")
        }
        #expect(tries.count < 3, "a 50 ms receive returned after \(tries.joined(separator: ", ")): polling kept the loop past the deadline")
    }
}
