import CHandoffChecksum
import Foundation
import Handoff
import HandoffWire
import Synchronization
import Testing
import HandoffTestSupport

private let listContacts = "org.handoff.contacts.list-contacts"

/// Bytes of stream `seed` that never repeat at any distance a stream could slip by (a chunk, a
/// window): a 64-bit linear congruential sequence, eight bytes a step.
///
/// Made eight bytes at a time: the tests make up to 64 MB of it in a debug build, where a byte at a
/// time (a `map` over the range) took 13 s of one of the two threads of Swift's pool on the 2-core
/// VM, 0.4 s so; with the pool's other thread held as well, every node's timers in the
/// test process (`Task.sleep` wakes through that pool) stopped for as long (the one-loop pass,
/// 2026-12-06: every node's presence 13.4 s late at once, and a test of sites failed).
func patternBytes(_ count: Int, seed: UInt8) -> Data {
    var data = Data(count: count)
    data.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) in
        guard let base = buffer.baseAddress else { return }
        var state = 0x9E37_79B9_7F4A_7C15 &* (UInt64(seed) &+ 1)
        var offset = 0
        while offset < count {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            var word = (state ^ (state >> 29)).littleEndian
            let length = min(8, count - offset)
            withUnsafeBytes(of: &word) { (base + offset).copyMemory(from: $0.baseAddress!, byteCount: length) }
            offset += 8
        }
    }
    return data
}

/// An originator-side delegate that sends `outgoing` and reads what comes back, recording the outcome.
final class StreamPeer: UserActivityDelegate, @unchecked Sendable {
    let outgoing: Data
    let readLimit: Int
    let finishWriting: Bool
    /// How long the delegate waits before it starts reading (consuming nothing grants no credit back).
    let readDelay: Duration
    private let lock = NSLock()
    private var _received: Result<Data, HandoffError>?
    private var _writeError: HandoffError?
    private var _streams: ContinuationStreams?

    init(sending outgoing: Data, finishWriting: Bool = true, readLimit: Int = .max, readDelay: Duration = .zero) {
        self.outgoing = outgoing
        self.readDelay = readDelay
        self.finishWriting = finishWriting
        self.readLimit = readLimit
    }

    var received: Result<Data, HandoffError>? { lock.withLock { _received } }
    var writeError: HandoffError? { lock.withLock { _writeError } }
    var streams: ContinuationStreams? { lock.withLock { _streams } }

    func userActivity(_ activity: UserActivity, didReceive streams: ContinuationStreams) async {
        lock.withLock { _streams = streams }
        async let reading: Result<Data, HandoffError> = {
            if readDelay > .zero { try? await Task.sleep(for: readDelay) }
            do throws(HandoffError) { return .success(try await streams.input.readAll(limit: readLimit)) } catch { return .failure(error) }
        }()
        do {
            streams.output.expectedLength = UInt64(outgoing.count)
            try await streams.output.write(outgoing)
            if finishWriting { try await streams.output.finish() }
        } catch {
            lock.withLock { _writeError = error }
        }
        let result = await reading
        lock.withLock { _received = result }
    }
}

/// Makes a list-contacts activity that supports streams, served by `delegate`, current on `node`.
func currentStreamingActivity(on node: Node, delegate: StreamPeer) async throws -> UserActivity {
    let activity = try UserActivity(activityType: listContacts)
    activity.supportsContinuationStreams = true
    activity.delegate = delegate
    try await activity.becomeCurrent(on: node)
    return activity
}

/// Makes a streaming activity current on `a`, continues it on `b`, and opens streams.
func openedStreams(from a: Node, to b: Node, delegate: StreamPeer) async throws -> (UserActivity, ContinuationStreams) {
    let activity = try UserActivity(activityType: listContacts)
    activity.supportsContinuationStreams = true
    activity.userInfo = ["count": 3]
    activity.delegate = delegate
    try await activity.becomeCurrent(on: a)
    await b.setContinuationHandler(forType: listContacts) { _ in }
    let found = try await discovered(activity.id, on: b)
    guard case .restored(let continued) = try await b.continueActivity(found) else { throw CancellationError() }
    return (activity, try await b.openStreams(for: continued))
}

/// Opens streams from `b` to a streaming activity of `a` and sends bytes both ways at once: each
/// side must read the other's whole, and the progress must say so.
func expectBytesBothWays(from a: Node, to b: Node, fromOriginator originatorCount: Int, fromContinuer continuerCount: Int) async throws {
    let fromOriginator = patternBytes(originatorCount, seed: 1)
    let fromContinuer = patternBytes(continuerCount, seed: 2)
    let peer = StreamPeer(sending: fromOriginator)
    let (_, streams) = try await openedStreams(from: a, to: b, delegate: peer)
    async let written: Void = {
        try await streams.output.write(fromContinuer)
        try await streams.output.finish()
    }()
    let received = try await streams.input.readAll()
    try await written
    #expect(received == fromOriginator)
    #expect(streams.input.progress == StreamProgress(bytes: UInt64(originatorCount), total: UInt64(originatorCount)))
    #expect(streams.output.progress.bytes == UInt64(continuerCount))
    #expect(await eventually { peer.received != nil })
    #expect(try peer.received?.get() == fromContinuer)
}

@Suite("Continuation streams", .exclusive)
struct StreamTests {
    @Test("CRC-32C matches the standard check value, in pieces as whole")
    func crc32c() {
        let check = Array("123456789".utf8)
        #expect(handoff_crc32c(0, check, check.count) == 0xE306_9283)
        let data = patternBytes(100_003, seed: 7)
        let whole = data.withUnsafeBytes { handoff_crc32c(0, $0.baseAddress, $0.count) }
        let pieces = data.withUnsafeBytes { bytes in
            handoff_crc32c(handoff_crc32c(0, bytes.baseAddress, 40_000), bytes.baseAddress! + 40_000, 60_003)
        }
        #expect(whole == pieces)
        #expect(handoff_crc32c(0, nil, 0) == 0)
    }

    @Test("bytes flow both ways at once, intact, with progress")
    func bothWays() async throws {
        try await withTwoNodes { a, b in
            try await expectBytesBothWays(from: a, to: b, fromOriginator: 3_000_000, fromContinuer: 1_234_567)
        }
    }

    @Test("a reader that does not read holds the writer to its window: memory stays bounded")
    func flowControlBoundsMemory() async throws {
        try await withTwoNodes(configureB: { $0.streamWindow = 4 }) { a, b in
            let chunk = 256 * 1024
            let peer = StreamPeer(sending: patternBytes(40 * chunk, seed: 3))
            let (_, streams) = try await openedStreams(from: a, to: b, delegate: peer)
            // The writer sends the window (4 chunks), however slowly a loaded machine lets it, and may
            // be holding the next one; given a moment more, it has stopped.
            func sent() -> UInt64 { peer.streams?.output.progress.bytes ?? 0 }
            try await waitUntil(within: .seconds(10)) { sent() >= UInt64(4 * chunk) }
            var stalled = sent()
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(200))
                if sent() == stalled { break }
                stalled = sent()
            }
            #expect(stalled <= UInt64(5 * chunk))
            try await Task.sleep(for: .milliseconds(200))
            #expect(try #require(peer.streams).output.progress.bytes == stalled)
            // Reading releases it, chunk by chunk, to the end.
            let all = try await streams.input.readAll()
            #expect(all.count == 40 * chunk)
        }
    }

    @Test("the continuing side cancels: the originator's writer and reader stop with streamCancelled")
    func cancelFromContinuer() async throws {
        try await withTwoNodes(configureB: { $0.streamWindow = 2 }) { a, b in
            let peer = StreamPeer(sending: patternBytes(8_000_000, seed: 4))
            let (_, streams) = try await openedStreams(from: a, to: b, delegate: peer)
            var iterator = streams.input.makeAsyncIterator()
            _ = try await iterator.next()
            await streams.cancel(reason: "user closed the window")
            #expect(await eventually { peer.writeError != nil && peer.received != nil })
            #expect(peer.writeError?.code == .streamCancelled)
            #expect(peer.writeError?.message.contains("user closed the window") == true)
            if case .failure(let error)? = peer.received { #expect(error.code == .streamCancelled) } else { Issue.record("the originator's read must fail") }
            do {
                while try await iterator.next() != nil {}
                Issue.record("a cancelled stream must not finish normally")
            } catch let error as HandoffError {
                #expect(error.code == .streamCancelled)
            }
        }
    }

    @Test("the originator cancels: the continuing side's read fails and delivers no complete data")
    func cancelFromOriginator() async throws {
        try await withTwoNodes(configureB: { $0.streamWindow = 2 }) { a, b in
            let peer = StreamPeer(sending: patternBytes(8_000_000, seed: 5), finishWriting: false)
            let (_, streams) = try await openedStreams(from: a, to: b, delegate: peer)
            #expect(await eventually { peer.streams != nil })
            await peer.streams!.cancel(reason: "originator is busy")
            do {
                _ = try await streams.input.readAll()
                Issue.record("a cancelled stream must not be read to the end")
            } catch let error as HandoffError {
                #expect(error.code == .streamCancelled)
                #expect(error.message.contains("originator is busy"))
            }
        }
    }

    @Test("many stream pairs at once do not interfere")
    func concurrentStreams() async throws {
        try await withTwoNodes(configureA: { $0.maxStreamsPerPeer = 6 }, configureB: { $0.streamWindow = 3 }) { a, b in
            let count = 6
            var peers: [StreamPeer] = []
            var pairs: [ContinuationStreams] = []
            for index in 0..<count {
                let peer = StreamPeer(sending: patternBytes(500_000 + index * 77_777, seed: UInt8(10 + index)))
                let (_, streams) = try await openedStreams(from: a, to: b, delegate: peer)
                peers.append(peer)
                pairs.append(streams)
            }
            // One reader stalls; the others must still complete.
            let stalled = pairs[0]
            try await withThrowingTaskGroup(of: (Int, Data).self) { group in
                for index in 1..<count {
                    let streams = pairs[index]
                    group.addTask { (index, try await streams.input.readAll()) }
                }
                for try await (index, data) in group {
                    #expect(data == peers[index].outgoing, "stream \(index)")
                }
            }
            #expect(try await stalled.input.readAll() == peers[0].outgoing)
        }
    }

    @Test("streams are refused for an activity that does not support them, or has no delegate for them")
    func refused() async throws {
        try await withTwoNodes { a, b in
            await b.setContinuationHandler(forType: listContacts) { _ in }
            let plain = try UserActivity(activityType: listContacts)
            try await plain.becomeCurrent(on: a)
            let continuedPlain = try #require(try await b.continueActivity(try await discovered(plain.id, on: b)).restored)
            await #expect(throws: HandoffError.self) { try await b.openStreams(for: continuedPlain) }

            let noDelegate = try UserActivity(activityType: listContacts)
            noDelegate.supportsContinuationStreams = true
            try await noDelegate.becomeCurrent(on: a)
            let continued = try #require(try await b.continueActivity(try await discovered(noDelegate.id, on: b)).restored)
            do {
                _ = try await b.openStreams(for: continued)
                Issue.record("an originator with no stream delegate must refuse")
            } catch let error as HandoffError {
                #expect(error.code == .streamsNotSupported)
                #expect(error.message.contains("delegate"))
            }
        }
    }
}

@Suite("CRC-32C", .exclusive)
struct ChecksumTests {
    @Test("every implementation this CPU runs agrees with the tables on every length and alignment, copying or not")
    func fastPathsMatchReference() {
        var generator = SystemRandomNumberGenerator()
        let buffer = (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let implementations = Array(HANDOFF_CRC32C_LANES...handoff_crc32c_implementation())
        // Around every boundary of every path: 8-byte words, 256-byte and 4 KiB lanes, 256-byte folds (two at least).
        let lengths = Array(0..<100) + [255, 256, 257, 511, 512, 513, 767, 768, 769, 1023, 1024, 1025, 4095, 12_287, 12_288,
                                        12_289, 12_288 + 768, 40_000, 65_000, 262_144, 262_144 + 255, 262_144 + 513]
        buffer.withUnsafeBytes { bytes in
            for length in lengths {
                for offset in [0, 1, 3, 7, 13] {
                    let start = bytes.baseAddress! + offset
                    let seed = UInt32.random(in: 0...UInt32.max, using: &generator)
                    let reference = handoff_crc32c_portable(seed, start, length)
                    for implementation in implementations {
                        #expect(handoff_crc32c_using(implementation, seed, start, length) == reference,
                                "implementation \(implementation), length \(length), offset \(offset)")
                        var copy = [UInt8](repeating: 0, count: length)
                        let copied = copy.withUnsafeMutableBytes { handoff_crc32c_copy_using(implementation, seed, $0.baseAddress, start, length) }
                        #expect(copied == reference, "copying: implementation \(implementation), length \(length), offset \(offset)")
                        #expect(copy.elementsEqual(UnsafeRawBufferPointer(start: start, count: length)),
                                "copy: implementation \(implementation), length \(length)")
                    }
                    #expect(handoff_crc32c(seed, start, length) == reference)
                }
            }
        }
        // This project's machines have SSE4.2; those with VPCLMULQDQ (AVX2 or AVX-512) fold.
        #expect(handoff_crc32c_implementation() >= HANDOFF_CRC32C_LANES, "this machine has SSE4.2; a fast path should be in use")
    }
}
