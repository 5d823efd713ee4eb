import Foundation
@testable import Handoff
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
import HandoffTestSupport

/// Reads a whole input slowly: one chunk, then a pause.
private func readSlowly(_ input: ContinuationInputStream, pause: Duration) async throws -> Data {
    var result = Data()
    for try await chunk in input {
        result.append(chunk)
        try await Task.sleep(for: pause)
    }
    return result
}

/// Stream pairs under the conditions they are for: slower than every timeout, one way, broken
/// connections, peers that break the rules, more pairs than allowed.
@Suite("Continuation streams under real conditions", .exclusive, .serialized)
struct StreamResilienceTests {
    @Test("a transfer that outlasts every timeout in the configuration completes: slow is not dead")
    func slowReaderOutlastsTimeouts() async throws {
        let short: (inout Node.Configuration) -> Void = {
            $0.continueTimeout = .seconds(1)
            // Three seconds, not two: the one-loop pass (every test's nodes on one thread) has
            // run a node's tasks two seconds late, and a node that did not run heard nothing.
            $0.streamIdleTimeout = .seconds(3)
            $0.streamResumeWindow = .seconds(3)
            $0.streamWindow = 2
            $0.streamChunkSize = 64 * 1024
        }
        try await withTwoNodes(configureA: short, configureB: short) { a, b in
            let payload = patternBytes(20 * 64 * 1024, seed: 21)
            let peer = StreamPeer(sending: payload)
            let (_, streams) = try await openedStreams(from: a, to: b, delegate: peer)
            let started = ContinuousClock.now
            async let written: Void = streams.output.finish()
            // 20 chunks × 0.4 s: about 8 s, past the open's timeout (1 s), the idle timeout (3 s)
            // and the resume window (3 s) together.
            let received = try await readSlowly(streams.input, pause: .milliseconds(400))
            try await written
            #expect(ContinuousClock.now - started > .seconds(7))
            #expect(byteDifference(received, payload) == nil)
            #expect(await eventually { peer.received != nil })
            #expect(try peer.received?.get() == Data())
            let counters = await b.streamCounters
            #expect(counters.resumed == 0, "a slow reader is not an interruption")
            #expect(await a.streamCounters.lost == 0)
        }
    }

    @Test("a pair opened one way: the continuer only reads, finishes nothing, and both sides complete")
    func oneWay() async throws {
        try await withTwoNodes { a, b in
            let payload = patternBytes(900_000, seed: 22)
            let peer = StreamPeer(sending: payload)
            let activity = try await currentStreamingActivity(on: a, delegate: peer)
            await b.setContinuationHandler(forType: activity.activityType) { _ in }
            guard case .restored(let continued) = try await b.continueActivity(try await discovered(activity.id, on: b)) else {
                Issue.record("not restored")
                return
            }
            let streams = try await b.openStreams(for: continued, direction: .fromOriginator)
            let readBack = try await streams.input.readAll()
            #expect(byteDifference(readBack, payload) == nil)
            // The originator's reading half was empty and ended from the start.
            #expect(await eventually { peer.received != nil })
            #expect(try peer.received?.get() == Data())
            await #expect(throws: HandoffError.self) { try await streams.output.write(Data([1, 2, 3])) }
            // Nothing left open on either side: no idle timeout, no extra step.
            #expect(await eventually { await a.openStreams.isEmpty })
            #expect(await eventually { await b.openStreams.isEmpty })
        }
    }

    @Test("the connection drops mid-transfer: the pair resumes as soon as its new connection is up (not at its next resume a second later), where it stopped, every byte once")
    func resumesAfterDroppedConnection() async throws {
        try await withTwoNodes(configureB: { $0.streamWindow = 4 }) { a, b in
            let payload = patternBytes(12_000_000, seed: 23)
            let back = patternBytes(3_000_000, seed: 24)
            let peer = StreamPeer(sending: payload)
            let (activity, streams) = try await openedStreams(from: a, to: b, delegate: peer)
            _ = activity
            async let written: Void = {
                try await streams.output.write(back)
                try await streams.output.finish()
            }()
            var received = Data()
            var dropped = false
            var resumedWithin: Task<(Duration, Duration)?, Never>?
            for try await chunk in streams.input {
                received.append(chunk)
                if !dropped, received.count > 4_000_000 {
                    dropped = true
                    let endpoint = a.continuationEndpoint
                    let probe = StallProbe.start(alsoOn: EventLoops.shared), droppedAt = ContinuousClock.now
                    await b.dropConnection(to: endpoint)
                    // The first tick after the drop (within 250 ms) asks to resume on a new DEALER,
                    // which the transport refuses until it is connected; the handshake then resumes
                    // the pair at once. Before, the next resume came a second after the first.
                    resumedWithin = Task {
                        guard await eventually(within: .seconds(10), { await b.streamCounters.resumed >= 1 }) else { return nil }
                        return (ContinuousClock.now - droppedAt, probe.stop())
                    }
                }
                try await Task.sleep(for: .milliseconds(2))
            }
            try await written
            #expect(dropped)
            let (resumedAfter, held) = try #require(await resumedWithin?.value, "the pair never resumed")
            print("stream resumed \(resumedAfter) after its connection dropped (loops held back \(held))")
            #expect(resumedAfter < .milliseconds(900) + held, "resumed \(resumedAfter) after the drop (the loaded machine held threads back by \(held))")
            #expect(byteDifference(received, payload) == nil)
            #expect(await eventually { peer.received != nil })
            #expect(byteDifference(try peer.received?.get() ?? Data(), back) == nil)
            let counters = await a.streamCounters
            #expect(counters.resumed >= 1)
            // What was sent twice is at most what was unacknowledged: the window (4 chunks of 256 KiB).
            #expect(counters.bytesResent <= 4 * 256 * 1024, "resent \(counters.bytesResent)")
            #expect(await b.streamCounters.resumed >= 1)
        }
    }

    @Test("an originator that shuts down: its continuing peer's pair fails with peerLost within 3 s (told by the originator, or finding its port closed), not after the resume window")
    func originatorShutdownIsTold() async throws {
        let a = try Node(configuration: testConfiguration("leaving"))
        let b = try Node(configuration: testConfiguration("staying", peers: [a.busEndpoint!]))
        let runA = Task { try await a.run() }
        let runB = Task { try await b.run() }
        defer { runB.cancel() }
        await a.untilRunning()
        await b.untilRunning()
        let peer = StreamPeer(sending: patternBytes(64_000_000, seed: 26), finishWriting: false, readDelay: .seconds(60))
        let (_, streams) = try await openedStreams(from: a, to: b, delegate: peer)
        var iterator = streams.input.makeAsyncIterator()
        _ = try await iterator.next()
        runA.cancel()
        let bound = WaitDeadline(.seconds(3))  // plus what the machine held the process back
        do {
            while try await iterator.next() != nil {}
            Issue.record("the stream ended as if complete")
        } catch {
            #expect(error.code == .peerLost)
            // The shutdown notice usually arrives first; when the connection's end overtakes it (1
            // run in about 10 here), the closed port says the same within a second.
            #expect(error.message.contains("leaving shut down") || error.message.contains("refuses connections"), "\(error.message)")
            print("the continuing side learned of the originator's shutdown: \(error.message)")
        }
        #expect(!bound.passed, "the continuing side learned of the originator's shutdown late: \(bound.account)")
    }

    @Test("a continuing node that never comes back: the originator's pair fails with peerLost after the resume window")
    func lostAfterResumeWindow() async throws {
        let short: (inout Node.Configuration) -> Void = {
            $0.streamIdleTimeout = .milliseconds(600)
            $0.streamResumeWindow = .milliseconds(800)
        }
        try await withTwoNodes(configureA: short, configureB: short) { a, b in
            let peer = StreamPeer(sending: patternBytes(4_000_000, seed: 25), finishWriting: false)
            let (_, streams) = try await openedStreams(from: a, to: b, delegate: peer)
            _ = streams
            #expect(await eventually { peer.streams != nil })
            // B forgets the pair without a word, as a crashed process would.
            await b.forgetAllStreamsForTesting()
            #expect(await eventually(within: .seconds(6)) { peer.received != nil })
            if case .failure(let error)? = peer.received {
                #expect(error.code == .peerLost)
                #expect(error.message.contains("resume window"), "\(error.message)")
            } else {
                Issue.record("the originator's read must fail with peerLost")
            }
        }
    }

    @Test("a peer that ignores its credit gets streamProtocolViolation; memory holds at the window")
    func creditIsEnforced() async throws {
        try await withTwoNodes { a, _ in
            // The originator reads nothing for a second: no credit flows back while the peer pushes.
            let peer = StreamPeer(sending: Data(), readDelay: .seconds(1))
            let activity = try await currentStreamingActivity(on: a, delegate: peer)

            // A hostile continuing node, speaking the wire contract by hand.
            let hostile = try WirePeer(connectingTo: a.continuationEndpoint)
            try hostile.openStream(7, activityID: activity.id, window: 4)
            let answer = try #require(try await hostile.receive(within: .seconds(5)), "the originator never answered the open").envelope
            guard case .streamFrame(let opened) = answer.body, case .open(let accepted) = opened.kind else {
                Issue.record("expected the originator's open, got \(answer.body as Any)")
                return
            }
            // Push far more chunks than the originator's window, without waiting for credit.
            let chunk = [UInt8](repeating: 7, count: 65536)
            for index in 0..<(Int(accepted.window) * 4) {
                var data = WireStreamData()
                data.offset = UInt64(index * chunk.count)
                data.length = UInt32(chunk.count)
                try hostile.send(stream: 7, .data(data), payload: chunk)
            }
            #expect(await eventually { peer.received != nil })
            if case .failure(let error)? = peer.received {
                #expect(error.code == .streamProtocolViolation)
                #expect(error.message.contains("window"), "\(error.message)")
            } else {
                Issue.record("the originator's read must fail")
            }
            #expect(await a.streamCounters.protocolViolations == 1)
            // The hostile peer is told, in a typed error.
            var told = false
            while let (envelope, _) = try await hostile.receive(within: .seconds(10)) {
                if case .streamFrame(let frame) = envelope.body, case .error(let error) = frame.kind {
                    told = error.code == .streamProtocolViolation
                    break
                }
            }
            #expect(told)
        }
    }

    @Test("more pairs than a peer may open are refused with tooManyStreams; the ones open keep working")
    func perPeerLimit() async throws {
        // B's window of 2 chunks holds each writer until B reads: the pairs stay open.
        try await withTwoNodes(configureA: { $0.maxStreamsPerPeer = 2 }, configureB: { $0.streamWindow = 2 }) { a, b in
            let peer = StreamPeer(sending: patternBytes(4_000_000, seed: 26))
            let activity = try await currentStreamingActivity(on: a, delegate: peer)
            await b.setContinuationHandler(forType: activity.activityType) { _ in }
            let continued = try #require(try await b.continueActivity(try await discovered(activity.id, on: b)).restored)
            let first = try await b.openStreams(for: continued, direction: .fromOriginator)
            let second = try await b.openStreams(for: continued, direction: .fromOriginator)
            do {
                _ = try await b.openStreams(for: continued, direction: .fromOriginator)
                Issue.record("a third pair must be refused")
            } catch let error as HandoffError {
                #expect(error.code == .tooManyStreams)
                #expect(error.message.contains("per peer"), "\(error.message)")
            }
            let firstRead = try await first.input.readAll()
            #expect(byteDifference(firstRead, peer.outgoing) == nil)
            let secondRead = try await second.input.readAll()
            #expect(byteDifference(secondRead, peer.outgoing) == nil)
            #expect(await a.streamCounters.refusedOverLimit == 1)
            // Once those are done, the peer may open again.
            #expect(await eventually { await a.openStreams.isEmpty })
            let third = try await b.openStreams(for: continued, direction: .fromOriginator)
            let thirdRead = try await third.input.readAll()
            #expect(byteDifference(thirdRead, peer.outgoing) == nil)
        }
    }
}

@Suite("Streams under pressure", .exclusive)
struct StreamPressureTests {
    @Test("at the node's limit, a new open ends the pair longest stalled on its peer, which is told why")
    func stalledPairIsEvicted() async throws {
        try await withTwoNodes(configureA: { $0.maxStreams = 2; $0.streamStallGrace = .milliseconds(300) }) { a, _ in
            let peer = StreamPeer(sending: patternBytes(4_000_000, seed: 31))
            let activity = try await currentStreamingActivity(on: a, delegate: peer)

            // Peers that open with a 2-chunk window and never read: the writers stall on them.
            let hostile = try WirePeer(connectingTo: a.continuationEndpoint)
            func open(_ stream: UInt64, as nodeID: String) throws {
                try hostile.openStream(stream, activityID: activity.id, window: 2, as: nodeID)
            }
            // Every stream frame that comes back, by stream id (opens answered, data, errors), until `enough` holds
            // of them. Waiting on what came rather than for a fixed time: on a loaded machine answers come late.
            typealias Answer = (UInt64, WireStreamFrame.OneOf_Kind?)
            func answers(until enough: ([Answer]) -> Bool) async throws -> [Answer] {
                var seen: [Answer] = []
                let deadline = ContinuousClock.now + .seconds(15)
                while !enough(seen), ContinuousClock.now < deadline,
                    let (envelope, _) = try await hostile.receive(within: deadline - ContinuousClock.now)
                {
                    if case .streamFrame(let frame) = envelope.body { seen.append((frame.streamID, frame.kind)) }
                }
                return seen
            }
            func dataFrames(on stream: UInt64, in seen: [Answer]) -> Int {
                seen.count { id, kind in if id == stream, case .data? = kind { true } else { false } }
            }
            try open(1, as: "stalling-1")
            try open(2, as: "stalling-2")
            // Both answered and their 2-chunk windows spent: the writers now wait for credit. Then past the grace.
            let stalled = try await answers { seen in dataFrames(on: 1, in: seen) >= 2 && dataFrames(on: 2, in: seen) >= 2 }
            #expect(dataFrames(on: 1, in: stalled) == 2 && dataFrames(on: 2, in: stalled) == 2, "\(stalled.map(\.0))")
            try await Task.sleep(for: .milliseconds(600))

            try open(3, as: "newcomer")
            let after = try await answers { seen in
                seen.contains { $0.0 == 3 } && seen.contains { id, kind in if id != 3, case .error? = kind { true } else { false } }
            }
            let opened = after.contains { id, kind in if id == 3, case .open? = kind { true } else { false } }
            #expect(opened, "the newcomer's open must be answered, got \(after.map(\.0))")
            let evicted = after.compactMap { id, kind -> WireError? in
                if id == 1 || id == 2, case .error(let error)? = kind { error } else { nil }
            }
            #expect(evicted.count == 1)
            #expect(evicted.first?.code == .tooManyStreams)
            #expect(evicted.first?.details["scope"] == "evicted")
            #expect(await a.streamCounters.evicted == 1)
        }
    }

    @Test("a peer that opens pairs and fails each at once, hundreds of times, leaves at most maxStreams failed pairs in the node's table, and the node still opens a pair for another peer")
    func churnedPairsBounded() async throws {
        try await withTwoNodes(configureA: { $0.maxStreams = 8 }) { a, b in
            let peer = StreamPeer(sending: Data("hello".utf8))
            let activity = try await currentStreamingActivity(on: a, delegate: peer)
            let churner = try WirePeer(connectingTo: a.continuationEndpoint)
            var error = WireError()
            error.code = .streamCancelled
            error.message = "churning"
            var answered = 0
            for stream in UInt64(1)...300 {
                try churner.openStream(stream, activityID: activity.id, window: 2, as: "churner")
                // Its answer (the open, then perhaps a chunk), before it is failed.
                while let (envelope, _) = try await churner.receive(within: .seconds(10)) {
                    if case .streamFrame(let frame) = envelope.body, frame.streamID == stream, case .open? = frame.kind {
                        answered += 1
                        break
                    }
                }
                try churner.send(stream: stream, .error(error), as: "churner")
            }
            #expect(answered == 300)
            // The last error frames are read by the node's loop a moment later (however late it runs).
            _ = await eventually { await a.pairsInTable <= 8 + 1 }
            let held = await a.pairsInTable
            #expect(held <= 8 + 1, "the node holds \(held) pairs after 300 churned ones")
            await b.setContinuationHandler(forType: activity.activityType) { _ in }
            let continued = try #require(try await b.continueActivity(try await discovered(activity.id, on: b)).restored)
            let streams = try await b.openStreams(for: continued, direction: .fromOriginator)
            #expect(try await streams.input.readAll() == Data("hello".utf8))
        }
    }
}

extension Node {
    /// Every pair in the node's stream table, live or failed (kept a while).
    fileprivate var pairsInTable: Int { streams.count }
}
