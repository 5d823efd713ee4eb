@testable import Handoff
import Testing

/// ``UnfinishedMessageBound`` on its own: connections and the kernel's counts made up, no socket.
@Suite("The bound on a message that never ends (no I/O)")
struct UnfinishedMessageBoundTests {
    /// What the made-up kernel says each descriptor has handed libzmq.
    private final class Kernel {
        var handed: [Int32: Int] = [:]
        func read(_ descriptor: Int32, _ peer: String) -> Int? { handed[descriptor] }
    }

    @Test("rule: a connection that delivers no whole message is cut once it has handed libzmq more than the bound since it last did; the check says how much")
    func silentGrowthIsCut() {
        var bound = UnfinishedMessageBound<String>(bound: 1_000)
        let kernel = Kernel()
        bound.watch(7, peer: "a")
        kernel.handed[7] = 300  // its handshake, before the first check
        #expect(bound.check(read: kernel.read).isEmpty)
        kernel.handed[7] = 1_300  // 1,000 since: at the bound, not past it
        #expect(bound.check(read: kernel.read).isEmpty)
        kernel.handed[7] = 1_301
        #expect(bound.check(read: kernel.read) == [.init(descriptor: 7, peer: "a", bytes: 1_001)])
        #expect(bound.count == 0, "a connection cut is forgotten")
    }

    @Test("rule: a connection is counted from when it was watched, as the kernel counted it then: what it sends before the first check counts towards the bound")
    func countedFromTheWatch() {
        var bound = UnfinishedMessageBound<String>(bound: 1_000)
        let kernel = Kernel()
        bound.watch(7, peer: "a", handed: 40)  // its greeting, when the monitor named it
        kernel.handed[7] = 1_041  // all before the first check: 1,001 since the watch
        #expect(bound.check(read: kernel.read) == [.init(descriptor: 7, peer: "a", bytes: 1_001)])

        bound.watch(8, peer: "b", handed: 40)
        kernel.handed[8] = 1_000
        bound.delivered(on: 8)
        #expect(bound.check(read: kernel.read).isEmpty, "a connection that delivered counts afresh")
        kernel.handed[8] = 2_000
        #expect(bound.check(read: kernel.read).isEmpty, "1,000 since it delivered: at the bound")
    }

    @Test("rule: a connection that delivers a whole message between two checks counts again from what it has handed over by the second: one that delivers is never cut, however much it sends")
    func deliveringIsNeverCut() {
        var bound = UnfinishedMessageBound<String>(bound: 1_000)
        let kernel = Kernel()
        bound.watch(7, peer: "a")
        kernel.handed[7] = 0
        _ = bound.check(read: kernel.read)
        for round in 1...20 {
            kernel.handed[7] = round * 1_000_000
            bound.delivered(on: 7)
            #expect(bound.check(read: kernel.read).isEmpty, "cut in round \(round)")
        }
        // Then it stops delivering: what it hands over from the last check on counts.
        kernel.handed[7] = 20_000_900
        #expect(bound.check(read: kernel.read).isEmpty)
        kernel.handed[7] = 20_001_001
        #expect(bound.check(read: kernel.read).map(\.bytes) == [1_001])
    }

    @Test("rule: growth below the bound adds up across checks (a slow drip is cut too)")
    func slowDripAddsUp() {
        var bound = UnfinishedMessageBound<String>(bound: 1_000)
        let kernel = Kernel()
        bound.watch(3, peer: "a")
        kernel.handed[3] = 0
        _ = bound.check(read: kernel.read)
        var cutAt: Int?
        for round in 1...20 where cutAt == nil {
            kernel.handed[3] = round * 100
            if !bound.check(read: kernel.read).isEmpty { cutAt = round }
        }
        #expect(cutAt == 11)
    }

    @Test("rule: a connection the kernel no longer knows is forgotten, and a whole message on a descriptor not watched changes nothing")
    func goneIsForgotten() {
        var bound = UnfinishedMessageBound<String>(bound: 1_000)
        let kernel = Kernel()
        bound.watch(3, peer: "a")
        bound.watch(4, peer: "b")
        kernel.handed = [3: 0, 4: 0]
        _ = bound.check(read: kernel.read)
        kernel.handed[3] = nil
        bound.delivered(on: 9)
        #expect(bound.check(read: kernel.read).isEmpty)
        #expect(bound.count == 1)
    }

    @Test("rule: a descriptor whose count went back names a newer connection: it counts afresh from there, and a descriptor watched again forgets the old connection's count")
    func reusedDescriptorCountsAfresh() {
        var bound = UnfinishedMessageBound<String>(bound: 1_000)
        let kernel = Kernel()
        bound.watch(5, peer: "old")
        kernel.handed[5] = 900_000
        _ = bound.check(read: kernel.read)
        // The old connection went; the number went to a new one, not yet watched.
        kernel.handed[5] = 200
        #expect(bound.check(read: kernel.read).isEmpty)
        kernel.handed[5] = 1_100
        #expect(bound.check(read: kernel.read).isEmpty)
        kernel.handed[5] = 1_300
        #expect(bound.check(read: kernel.read).map(\.bytes) == [1_100])

        bound.watch(6, peer: "old")
        kernel.handed[6] = 900_000
        _ = bound.check(read: kernel.read)
        bound.watch(6, peer: "new")
        kernel.handed[6] = 901_500
        #expect(bound.check(read: kernel.read).isEmpty, "a connection newly watched is counted from its first check")
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
        #expect(bound.checkIfDue(now: start, read: counting).isEmpty)
        #expect(bound.nextCheckDue == nil, "nothing to wake for")
        bound.watch(1, peer: "a")
        kernel.handed[1] = 0
        #expect(bound.checkIfDue(now: start, read: counting).isEmpty)
        #expect(reads == 0)
        #expect(bound.nextCheckDue == start + .milliseconds(50))
        _ = bound.checkIfDue(now: start + .milliseconds(49), read: counting)
        #expect(reads == 0)
        _ = bound.checkIfDue(now: start + .milliseconds(50), read: counting)
        #expect(reads == 1)
        kernel.handed[1] = 11
        #expect(bound.checkIfDue(now: start + .milliseconds(99), read: counting).isEmpty)
        #expect(bound.checkIfDue(now: start + .milliseconds(100), read: counting).map(\.bytes) == [11])
        #expect(bound.count == 0)
        _ = bound.checkIfDue(now: start + .milliseconds(150), read: counting)
        #expect(bound.nextCheckDue == nil, "the only connection was cut: nothing to wake for")
    }
}
