@testable import Handoff
import Testing

/// ``UnfinishedMessageBound`` on its own: connections, the kernel's counts and the owner's empty
/// receives made up, no socket.
@Suite("The bound on a message that never ends (no I/O)")
struct UnfinishedMessageBoundTests {
    /// What the made-up kernel says each descriptor has handed libzmq, and how many times the
    /// owner found each source (socket) empty.
    private final class Kernel {
        var handed: [Int32: Int] = [:]
        var emptyReceives: [Int: UInt64] = [0: 0]
        func read(_ descriptor: Int32, _ peer: String) -> Int? { handed[descriptor] }
        var foundEmptyNow = false
        func emptiness(_ source: Int) -> UnfinishedMessageBound<String>.SourceEmptiness? {
            emptyReceives[source].map { .init(emptyReceives: $0, foundEmptyNow: foundEmptyNow) }
        }
    }

    /// A queue that may hold more than any test hands over.
    private let roomy = 1 << 40

    /// One check, the owner having found source 0 empty since the last one (it reads everything
    /// whole as it comes) unless `behind`.
    private func check(_ bound: inout UnfinishedMessageBound<String>, _ kernel: Kernel, behind: Bool = false) -> [UnfinishedMessageBound<String>.Unfinished] {
        if !behind { kernel.emptyReceives[0]! += 1 }
        return bound.check(read: kernel.read, emptiness: kernel.emptiness)
    }

    @Test("rule: a connection that delivers no whole message is cut once what it had handed libzmq by the last check, since it last delivered, is past the bound, and its owner has found its socket empty since; the check says how much")
    func silentGrowthIsCut() {
        var bound = UnfinishedMessageBound<String>(bound: 1_000)
        let kernel = Kernel()
        bound.watch(7, peer: "a", queueAllowance: roomy)
        kernel.handed[7] = 300  // its handshake, before the first check
        #expect(check(&bound, kernel).isEmpty)
        kernel.handed[7] = 1_300  // 1,000 since: at the bound, not past it
        #expect(check(&bound, kernel).isEmpty)
        kernel.handed[7] = 1_301
        #expect(check(&bound, kernel).isEmpty, "1,001 by now, but the owner may not have read it all yet")
        #expect(check(&bound, kernel) == [.init(descriptor: 7, peer: "a", bytes: 1_001)])
        #expect(bound.count == 0, "a connection cut is forgotten")
    }

    @Test("rule: a connection is counted from when it was watched, as the kernel counted it then: what it sends before the first check counts towards the bound")
    func countedFromTheWatch() {
        var bound = UnfinishedMessageBound<String>(bound: 1_000)
        let kernel = Kernel()
        bound.watch(7, peer: "a", queueAllowance: roomy, handed: 40)  // its greeting, when the monitor named it
        kernel.handed[7] = 1_041  // all before the first check: 1,001 since the watch
        #expect(check(&bound, kernel).isEmpty)
        #expect(check(&bound, kernel) == [.init(descriptor: 7, peer: "a", bytes: 1_001)])

        bound.watch(8, peer: "b", queueAllowance: roomy, handed: 40)
        kernel.handed[8] = 1_000
        bound.delivered(on: 8)
        #expect(check(&bound, kernel).isEmpty, "a connection that delivered counts afresh")
        kernel.handed[8] = 2_000
        #expect(check(&bound, kernel).isEmpty)
        #expect(check(&bound, kernel).isEmpty, "1,000 since it delivered: at the bound")
    }

    @Test("rule: while its owner is behind (whole messages wait in libzmq's queue: its socket never found empty), a connection is not judged by what it handed over; once the owner catches up, what it reads of it counts as delivered")
    func ownerBehindIsNotACut() {
        var bound = UnfinishedMessageBound<String>(bound: 1_000)
        let kernel = Kernel()
        bound.watch(7, peer: "broker", queueAllowance: 1_000_000, handed: 0)
        // A burst of whole messages the owner has not read yet: 10 times the bound.
        for round in 1...10 {
            kernel.handed[7] = round * 1_000
            #expect(check(&bound, kernel, behind: true).isEmpty, "cut while the owner was behind, round \(round)")
        }
        // The owner catches up: it reads them (delivered) and then finds its socket empty.
        bound.delivered(on: 7)
        #expect(check(&bound, kernel).isEmpty)
        #expect(check(&bound, kernel).isEmpty)
        #expect(bound.count == 1)
    }

    @Test("rule: a connection that sends a message without end while its owner is behind is cut once the owner finds its socket empty; an owner behind for good cuts it past the bound and all its queue may hold whole")
    func endlessWhileBehindIsCut() {
        var bound = UnfinishedMessageBound<String>(bound: 1_000)
        let kernel = Kernel()
        bound.watch(7, peer: "a", queueAllowance: 5_000, handed: 0)
        kernel.handed[7] = 3_000
        #expect(check(&bound, kernel, behind: true).isEmpty)
        // Found empty since: the 3,000 it had handed by the last check were all unfinished then.
        #expect(check(&bound, kernel).map(\.bytes) == [3_000])

        bound.watch(8, peer: "b", queueAllowance: 5_000, handed: 0)
        kernel.handed[8] = 6_000
        #expect(check(&bound, kernel, behind: true).isEmpty, "at the bound and the queue")
        kernel.handed[8] = 6_001
        #expect(check(&bound, kernel, behind: true).map(\.bytes) == [6_001])
    }

    @Test("rule: an owner that waits on its socket with nothing signalled since its last receive found it empty has read everything whole, as after an empty receive: an idle node judges the connections it reads from")
    func waitingOwnerJudges() {
        var bound = UnfinishedMessageBound<String>(bound: 1_000)
        let kernel = Kernel()
        bound.watch(7, peer: "a", queueAllowance: roomy, handed: 0)
        kernel.handed[7] = 3_000
        #expect(check(&bound, kernel, behind: true).isEmpty)
        #expect(check(&bound, kernel, behind: true).isEmpty, "neither an empty receive nor a wait: not judged")
        kernel.foundEmptyNow = true
        #expect(check(&bound, kernel, behind: true).map(\.bytes) == [3_000])
    }

    @Test("rule: a connection that delivers a whole message between two checks counts again from what it has handed over by the second: one that delivers is never cut, however much it sends")
    func deliveringIsNeverCut() {
        var bound = UnfinishedMessageBound<String>(bound: 1_000)
        let kernel = Kernel()
        bound.watch(7, peer: "a", queueAllowance: roomy)
        kernel.handed[7] = 0
        _ = check(&bound, kernel)
        for round in 1...20 {
            kernel.handed[7] = round * 1_000_000
            bound.delivered(on: 7)
            #expect(check(&bound, kernel).isEmpty, "cut in round \(round)")
        }
        // Then it stops delivering: what it hands over from the last check on counts.
        kernel.handed[7] = 20_000_900
        #expect(check(&bound, kernel).isEmpty)
        kernel.handed[7] = 20_001_001
        #expect(check(&bound, kernel).isEmpty)
        #expect(check(&bound, kernel).map(\.bytes) == [1_001])
    }

    @Test("rule: growth below the bound adds up across checks (a slow drip is cut too)")
    func slowDripAddsUp() {
        var bound = UnfinishedMessageBound<String>(bound: 1_000)
        let kernel = Kernel()
        bound.watch(3, peer: "a", queueAllowance: roomy)
        kernel.handed[3] = 0
        _ = check(&bound, kernel)
        var cutAt: Int?
        for round in 1...20 where cutAt == nil {
            kernel.handed[3] = round * 100
            if !check(&bound, kernel).isEmpty { cutAt = round }
        }
        #expect(cutAt == 12, "past the bound by round 11's reading, judged at the check after")
    }

    @Test("rule: a connection the kernel no longer knows is forgotten, and a whole message on a descriptor not watched changes nothing")
    func goneIsForgotten() {
        var bound = UnfinishedMessageBound<String>(bound: 1_000)
        let kernel = Kernel()
        bound.watch(3, peer: "a", queueAllowance: roomy)
        bound.watch(4, peer: "b", queueAllowance: roomy)
        kernel.handed = [3: 0, 4: 0]
        _ = check(&bound, kernel)
        kernel.handed[3] = nil
        bound.delivered(on: 9)
        #expect(check(&bound, kernel).isEmpty)
        #expect(bound.count == 1)
    }

    @Test("rule: a descriptor whose count went back names a newer connection: it counts afresh from there, and a descriptor watched again forgets the old connection's count")
    func reusedDescriptorCountsAfresh() {
        var bound = UnfinishedMessageBound<String>(bound: 1_000)
        let kernel = Kernel()
        bound.watch(5, peer: "old", queueAllowance: roomy)
        kernel.handed[5] = 900_000
        _ = check(&bound, kernel)
        // The old connection went; the number went to a new one, not yet watched.
        kernel.handed[5] = 200
        #expect(check(&bound, kernel).isEmpty)
        kernel.handed[5] = 1_100
        #expect(check(&bound, kernel).isEmpty)
        kernel.handed[5] = 1_300
        #expect(check(&bound, kernel).isEmpty)
        #expect(check(&bound, kernel).map(\.bytes) == [1_100])

        bound.watch(6, peer: "old", queueAllowance: roomy)
        kernel.handed[6] = 900_000
        _ = check(&bound, kernel)
        bound.watch(6, peer: "new", queueAllowance: roomy)
        kernel.handed[6] = 901_500
        #expect(check(&bound, kernel).isEmpty, "a connection newly watched is counted from its first check")
        #expect(check(&bound, kernel).isEmpty)
    }

    @Test("rule: what a socket's queue may hold whole is its high-water mark in messages of its largest frames, with framing; no mark, or one past any memory, is as good as none")
    func queueAllowance() {
        #expect(UnfinishedMessageBound<String>.queueAllowance(highWaterMark: 10, frames: 1, largestFrame: 1_024) == 10 * 1_033)
        #expect(UnfinishedMessageBound<String>.queueAllowance(highWaterMark: 0, frames: 3, largestFrame: 1_024) == Int.max / 4)
        #expect(UnfinishedMessageBound<String>.queueAllowance(highWaterMark: 100_000, frames: 3, largestFrame: Int.max) == Int.max / 4)
    }

    @Test("rule: checks come 50 ms apart, and further apart with more than 250 connections (200 µs each), the first an interval after the first call; none while nothing is watched")
    func checkSchedule() {
        #expect(UnfinishedMessageBound<String>.interval(watching: 0) == .milliseconds(50))
        #expect(UnfinishedMessageBound<String>.interval(watching: 250) == .milliseconds(50))
        #expect(UnfinishedMessageBound<String>.interval(watching: 10_000) == .seconds(2))

        var bound = UnfinishedMessageBound<String>(bound: 10)
        let kernel = Kernel()
        var reads = 0
        let counting: (Int32, String) -> Int? = { descriptor, peer in
            reads += 1
            return kernel.read(descriptor, peer)
        }
        let start = ContinuousClock.now
        func due(_ milliseconds: Int) -> [UnfinishedMessageBound<String>.Unfinished] {
            kernel.emptyReceives[0]! += 1
            return bound.checkIfDue(now: start + .milliseconds(milliseconds), read: counting, emptiness: kernel.emptiness)
        }
        #expect(due(0).isEmpty)
        #expect(bound.nextCheckDue == nil, "nothing to wake for")
        bound.watch(1, peer: "a", queueAllowance: roomy)
        kernel.handed[1] = 0
        #expect(due(0).isEmpty)
        #expect(reads == 0)
        #expect(bound.nextCheckDue == start + .milliseconds(50))
        _ = due(49)
        #expect(reads == 0)
        _ = due(50)
        #expect(reads == 1)
        kernel.handed[1] = 11
        #expect(due(99).isEmpty)
        #expect(due(100).isEmpty)
        #expect(due(150).map(\.bytes) == [11])
        #expect(bound.count == 0)
        _ = due(200)
        #expect(bound.nextCheckDue == nil, "the only connection was cut: nothing to wake for")
    }
}
