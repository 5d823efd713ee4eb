import Foundation
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ

@testable import Handoff
import HandoffTestSupport

/// The stall timeout on a pair's machine alone (``StreamPair``, ``StreamLiveness``): a peer that is
/// heard (keep-alives flow) but makes no progress is given up on, and told; a peer that is merely
/// slow, or a pair waiting on this side's own application, is not. No node, no socket, no clock.
@Suite("A stream pair's stall timeout, without sockets")
struct StreamStallTests {
    let start = ContinuousClock.now
    let limits = StreamLiveness.Limits(idleTimeout: .seconds(5), resumeWindow: .seconds(30), stallTimeout: .seconds(3))

    func pair(continuer: Bool, window: Int = 4) -> StreamPair {
        StreamPair(isContinuer: continuer, direction: .originToContinuer, peerName: continuer ? "the originator" : "the continuing node",
                   activityType: "org.handoff.test.bulk", window: window, chunkSize: 100, peerChunkSize: 100, now: start)
    }

    func chunk(at offset: UInt64) -> StreamPair.SentChunk {
        StreamPair.SentChunk(offset: offset, frame: Frame([UInt8](repeating: 7, count: 100)), total: 0)
    }

    func data(at offset: UInt64) -> WireStreamData {
        var data = WireStreamData()
        data.offset = offset
        return data
    }

    /// A keep-alive from the peer (StreamCredit with no chunks), acknowledging `offset`.
    func keepAlive(acknowledging offset: UInt64 = 0) -> WireStreamFrame.OneOf_Kind {
        var credit = WireStreamCredit()
        credit.acknowledgedOffset = offset
        return .credit(credit)
    }

    func failure(_ actions: [StreamPair.Action]) -> HandoffError? {
        actions.lazy.compactMap { if case .failed(let error) = $0 { error } else { nil } }.first
    }

    func noticeSent(_ actions: [StreamPair.Action]) -> WireError? {
        actions.lazy.compactMap { if case .send(.error(let error), _) = $0 { error } else { nil } }.first
    }

    /// Ticks `pair` every 250 ms from `from` to `to`, the peer's keep-alive arriving every second
    /// (unless `silent`), and returns the first tick's actions that failed it (and when), or nil.
    func tickWithKeepAlives(_ pair: inout StreamPair, from: Duration, to: Duration, acknowledging offset: UInt64 = 0,
                            silent: Bool = false, limits: StreamLiveness.Limits? = nil) -> (Duration, [StreamPair.Action])? {
        var at = from
        while at <= to {
            if !silent, at.components.attoseconds == 0 { _ = pair.received(keepAlive(acknowledging: offset), now: start + at) }
            let actions = pair.tick(now: start + at, limits: limits ?? self.limits)
            if failure(actions) != nil { return (at, actions) }
            at += .milliseconds(250)
        }
        return nil
    }

    @Test("stall rule: a reader that took all that arrived and gets nothing new from a peer that keeps the pair alive gives up, tells the peer, and counts it")
    func readerGivesUpOnASilentWriter() throws {
        var reader = pair(continuer: true)
        _ = reader.dataArrived(data(at: 0), chunk: Data(repeating: 1, count: 100), now: start)
        reader.readerTook(100, now: start + .milliseconds(500))
        let (at, actions) = try #require(tickWithKeepAlives(&reader, from: .seconds(1), to: .seconds(10)))
        #expect(at > .milliseconds(3_500) && at <= .seconds(4), "the wait counts from the reader's take at 0.5 s")
        let error = try #require(failure(actions))
        #expect(error.code == .remoteApplicationTimedOut && error.details["scope"] == "stalled")
        #expect(error.message.contains("the originator sent nothing new"), "\(error.message)")
        #expect(actions.contains { if case .record(.stalled) = $0 { true } else { false } })
        let notice = try #require(noticeSent(actions))
        #expect(notice.code == .remoteApplicationTimedOut && notice.details["scope"] == "stalled")

        // The peer, told, fails with the same code, and reads who gave up from its own side.
        var writer = pair(continuer: false)
        let told = try #require(failure(writer.received(.error(notice), now: start + at)))
        #expect(told.code == .remoteApplicationTimedOut && told.details["scope"] == "stalled")
        #expect(told.message.contains("the other side gave up") && told.message.contains("this side sent nothing new"), "\(told.message)")
    }

    @Test("stall rule: a writer whose chunks the peer never takes (no credit back, only keep-alives) gives up")
    func writerGivesUpOnAPeerThatNeverReads() throws {
        var writer = pair(continuer: false, window: 2)
        _ = writer.accept(WireStreamOpen.with { $0.window = 2 }, answer: WireStreamOpen(), now: start)
        _ = writer.write(chunk(at: 0), now: start)
        _ = writer.write(chunk(at: 100), now: start + .milliseconds(100))
        #expect(writer.sendCredit == 0)
        let (at, actions) = try #require(tickWithKeepAlives(&writer, from: .seconds(1), to: .seconds(10)))
        #expect(at > .milliseconds(3_100) && at <= .milliseconds(3_500))
        let error = try #require(failure(actions))
        #expect(error.message.contains("the continuing node took nothing of what was written to it"), "\(error.message)")
        #expect(noticeSent(actions)?.details["scope"] == "stalled")
    }

    @Test("stall rule: a slow peer that takes a chunk now and then makes progress, and is never given up on")
    func slowPeerIsNotStalled() {
        var writer = pair(continuer: false, window: 1)
        _ = writer.accept(WireStreamOpen.with { $0.window = 1 }, answer: WireStreamOpen(), now: start)
        var offset: UInt64 = 0
        // One chunk every 2.5 s: slower than a keep-alive, faster than the 3 s stall timeout.
        for step in 0..<8 {
            let at = Duration.milliseconds(2_500 * step)
            _ = writer.write(chunk(at: offset), now: start + at)
            offset += 100
            #expect(tickWithKeepAlives(&writer, from: at + .milliseconds(250), to: at + .milliseconds(2_250)) == nil)
            var credit = WireStreamCredit()
            credit.chunks = 1
            credit.acknowledgedOffset = offset
            _ = writer.received(.credit(credit), now: start + at + .milliseconds(2_400))
        }
        #expect(writer.isLive)
    }

    @Test("stall rule: a reader holding bytes it has not taken waits on its own application, however long")
    func readerHoldingBytesIsNotStalled() {
        var reader = pair(continuer: true)
        _ = reader.dataArrived(data(at: 0), chunk: Data(repeating: 1, count: 100), now: start)
        _ = reader.dataArrived(data(at: 100), chunk: Data(repeating: 1, count: 100), now: start)
        reader.readerTook(100, now: start + .seconds(1))  // one of two taken: the application is busy
        #expect(tickWithKeepAlives(&reader, from: .seconds(1), to: .seconds(60)) == nil)
        // It takes the second at 60 s: from then on the wait is the peer's.
        reader.readerTook(200, now: start + .seconds(60))
        let stalled = tickWithKeepAlives(&reader, from: .seconds(60), to: .seconds(70))
        #expect(stalled.map { $0.0 > .seconds(63) && $0.0 <= .milliseconds(63_250) } == true)
    }

    @Test("stall rule: time spent interrupted is the resume window's; the wait while connected, before and after the resume, counts")
    func interruptionDoesNotCount() throws {
        var answer = WireStreamResume()
        answer.window = 4
        // Heard until 2 s, then silence: by the rules still connected (and waiting) until the idle
        // timeout interrupts the pair at 7.25 s; resumed at 12 s. With a stall timeout of 8 s:
        // 7.25 s connected before, so it gives up 0.75 s after the resume, not at once.
        let eight = StreamLiveness.Limits(idleTimeout: .seconds(5), resumeWindow: .seconds(30), stallTimeout: .seconds(8))
        var reader = pair(continuer: true)
        #expect(tickWithKeepAlives(&reader, from: .seconds(1), to: .seconds(2), limits: eight) == nil)
        #expect(tickWithKeepAlives(&reader, from: .milliseconds(2_250), to: .seconds(12), silent: true, limits: eight) == nil)
        #expect(reader.interruptedSince == start + .milliseconds(7_250))
        _ = reader.received(.resume(answer), now: start + .seconds(12))
        let after = try #require(tickWithKeepAlives(&reader, from: .milliseconds(12_250), to: .seconds(20), limits: eight))
        #expect(after.0 == .seconds(13) && failure(after.1)?.details["scope"] == "stalled")

        // A pair cut off at once (the connection dropped): only the connected wait counts.
        var cut = pair(continuer: true)
        #expect(tickWithKeepAlives(&cut, from: .seconds(1), to: .seconds(2)) == nil)
        let dropped = cut.connectionDropped(failingOpenWith: HandoffError(.connectionUnavailable, "gone"), now: start + .seconds(2))
        #expect(dropped.interruptedNow)
        #expect(tickWithKeepAlives(&cut, from: .milliseconds(2_250), to: .seconds(20), silent: true) == nil)
        _ = cut.received(.resume(answer), now: start + .seconds(20))
        let late = try #require(tickWithKeepAlives(&cut, from: .milliseconds(20_250), to: .seconds(25)))
        #expect(late.0 == .milliseconds(21_250), "connected 2 s before and 1.25 s after: past 3 s")
    }

    @Test("stall rule: time this side did not run (its process stopped: no tick for 10 s) is not the peer's, even when the peer's frames wait for it")
    func ownPauseDoesNotCount() throws {
        var reader = pair(continuer: true)
        #expect(tickWithKeepAlives(&reader, from: .seconds(1), to: .seconds(2)) == nil)
        // Stopped from 2 s to 12 s; on waking it reads the keep-alive that waited, then ticks.
        _ = reader.received(keepAlive(), now: start + .seconds(12))
        #expect(failure(reader.tick(now: start + .seconds(12), limits: limits)) == nil)
        #expect(tickWithKeepAlives(&reader, from: .milliseconds(12_250), to: .seconds(13)) == nil)  // 2 s + 1 s
        let late = try #require(tickWithKeepAlives(&reader, from: .milliseconds(13_250), to: .seconds(20)))
        #expect(late.0 == .milliseconds(13_250))
    }

    @Test("stall rule: without a stall timeout, a peer that is heard may stall for an hour")
    func noTimeoutNoGivingUp() {
        var reader = pair(continuer: true)
        var at = Duration.seconds(1)
        while at <= .seconds(3_600) {
            _ = reader.received(keepAlive(), now: start + at)
            let actions = reader.tick(now: start + at, limits: .init(idleTimeout: .seconds(5), resumeWindow: .seconds(30)))
            #expect(failure(actions) == nil)
            at += .seconds(1)
        }
        #expect(reader.isLive)
    }
}

/// The stall timeout between two real nodes over their sockets: the rule above, carried out.
@Suite("Stream stall timeout between nodes", .exclusive)
struct StreamStallNodeTests {
    @Test("a continuing node with a stall timeout gives up on an originator that wrote a little, then kept the pair open writing nothing; both sides fail with the same typed error")
    func continuerGivesUpOnAStuckOriginator() async throws {
        try await withTwoNodes(configureB: { $0.streamStallTimeout = .milliseconds(1_500) }) { a, b in
            // It writes 1,000 bytes and never finishes: its node keeps the pair alive meanwhile.
            let peer = StreamPeer(sending: patternBytes(1_000, seed: 41), finishWriting: false)
            let (_, streams) = try await openedStreams(from: a, to: b, delegate: peer)
            let bound = WaitDeadline(.seconds(4))  // plus what the machine held the process back
            // What `handoff continue --save` shows while it waits: the wait, and when it ends.
            let shown = Task { () -> String? in
                for _ in 0..<150 {
                    if let wait = await b.streamWaits().first(where: { $0.state == .awaitingBytes }) { return wait.description }
                    try? await Task.sleep(for: .milliseconds(20))
                }
                return nil
            }
            var received = 0
            let error = await #expect(throws: HandoffError.self) {
                for try await chunk in streams.input { received += chunk.count }
            }
            #expect(received == 1_000)
            #expect(error?.code == .remoteApplicationTimedOut && error?.details["scope"] == "stalled", "\(String(describing: error))")
            #expect(error?.message.contains("sent nothing new") == true, "\(String(describing: error))")
            #expect(!bound.passed, "gave up late: the idle timeout or nothing ended it: \(bound.account)")
            #expect(await b.streamCounters.stalled == 1)
            let wait = await shown.value
            #expect(wait?.contains("nothing new from the originator") == true && wait?.contains("giving up at 1.5 s") == true, "\(String(describing: wait))")
            // The originator was told: its reading half fails with the same code.
            #expect(await eventually { peer.received != nil })
            guard case .failure(let told)? = peer.received else { Issue.record("the originator was not told: \(String(describing: peer.received))"); return }
            #expect(told.code == .remoteApplicationTimedOut && told.details["scope"] == "stalled" && told.message.contains("gave up"), "\(told)")
            #expect(await a.streamCounters.stalled == 0)
            let (lostA, lostB) = (await a.streamCounters.lost, await b.streamCounters.lost)
            #expect(lostA == 0 && lostB == 0)
        }
    }

    @Test("an originator with a stall timeout gives up on a hostile continuing peer that opens, keeps the pair alive, and never reads")
    func originatorGivesUpOnAPeerThatNeverReads() async throws {
        try await withTwoNodes(configureA: { $0.streamStallTimeout = .milliseconds(800) }) { a, _ in
            let peer = StreamPeer(sending: patternBytes(2_000_000, seed: 42))
            let activity = try await currentStreamingActivity(on: a, delegate: peer)

            let hostile = try WirePeer(connectingTo: a.continuationEndpoint)
            // One way: all it fails to do is read.
            try hostile.openStream(1, activityID: activity.id, window: 2, direction: .originToContinuer, as: "never-reads")
            // It answers as a live peer does, a keep-alive every 300 ms, and grants nothing.
            var errors: [WireError] = []
            let deadline = ContinuousClock.now + .seconds(5)
            while errors.isEmpty, ContinuousClock.now < deadline {
                try hostile.send(stream: 1, .credit(WireStreamCredit()), as: "never-reads")
                while let (envelope, _) = try await hostile.receive(within: .milliseconds(300)) {
                    if case .streamFrame(let frame) = envelope.body, case .error(let error)? = frame.kind { errors.append(error) }
                }
            }
            let error = try #require(errors.first, "the originator never gave up")
            #expect(error.code == .remoteApplicationTimedOut && error.details["scope"] == "stalled")
            #expect(error.message.contains("this side took nothing of what it wrote ("), "\(error.message)")
            #expect(await a.streamCounters.stalled == 1)
            #expect(await eventually { peer.writeError != nil })
            #expect(peer.writeError?.code == .remoteApplicationTimedOut)
        }
    }

    @Test("a `handoff agent --stream-stall-timeout 1` process gives up on a peer that opens its contacts list's stream, keeps it alive, and never reads")
    func agentProcessGivesUp() async throws {
        try await withAgentSharingContacts("stall-agent", arguments: ["--log-level", "error", "--stream-stall-timeout", "1"]) { activity, agent in
            // One way, a one-chunk window, keep-alives every 300 ms, and nothing granted or acknowledged.
            let hostile = try WirePeer(connectingTo: activity.continueEndpoint)
            try hostile.openStream(1, activityID: activity.id, window: 1, direction: .originToContinuer, as: "never-reads")
            let started = ContinuousClock.now, bound = WaitDeadline(.seconds(5))
            var notice: WireError?
            while notice == nil, ContinuousClock.now - started < .seconds(10) {
                try hostile.send(stream: 1, .credit(WireStreamCredit()), as: "never-reads")
                while let (envelope, _) = try await hostile.receive(within: .milliseconds(300)) {
                    if case .streamFrame(let frame) = envelope.body, case .error(let error)? = frame.kind { notice = error }
                }
            }
            let error = try #require(notice, "the agent never gave up on the pair")
            #expect(error.code == .remoteApplicationTimedOut && error.details["scope"] == "stalled", "\(error)")
            #expect(!bound.passed, "the agent gave up late: \(bound.account)")
            #expect(agent.isRunning)
        }
    }

    @Test("a stall timeout shorter than the reader's own pauses ends nothing: the time its application takes is its own")
    func slowOwnReaderIsNotAStall() async throws {
        let configure: (inout Node.Configuration) -> Void = {
            $0.streamWindow = 2
            $0.streamChunkSize = 64 * 1024
        }
        try await withTwoNodes(configureA: configure, configureB: { configure(&$0); $0.streamStallTimeout = .milliseconds(300) }) { a, b in
            let payload = patternBytes(5 * 64 * 1024, seed: 43)
            let peer = StreamPeer(sending: payload)
            let (_, streams) = try await openedStreams(from: a, to: b, delegate: peer)
            async let written: Void = streams.output.finish()
            var received = Data()
            for try await chunk in streams.input {
                received.append(chunk)
                try await Task.sleep(for: .milliseconds(700))  // over twice the stall timeout, each chunk
            }
            try await written
            #expect(received == payload)
            #expect(await b.streamCounters.stalled == 0)
        }
    }
}
