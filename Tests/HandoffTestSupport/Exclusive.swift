import Foundation
import Testing

/// Runs a test (each case of a parameterized one, each test of a suite it marks) with at most one
/// other test so marked, in every test target of the package; `.exclusive(.alone)`, with none.
/// Plain `swift test` runs tests in parallel, and tests that start processes, bind ports and
/// measure latencies on a 2-core machine would measure each other and starve Swift's pool (one
/// thread per core) with the blocking calls their processes need. Most of them wait on real time
/// far more than they compute (a lease to run down, a process to start, a link to come back), so
/// two at once leave the machine half idle still: on the 2-core VM (2026-12-05, one event loop),
/// the 142 that run longer than 0.3 s ran 311 s in all two at a time against 333 s one at a time,
/// and each pass of the suite took half as long. A test that reads what every test in the process
/// changes (a process-wide count: ``ReplyPolling``'s replies awaited) takes both places.
/// Tests without the trait (the protocol machines, the wire) run beside them.
/// `HANDOFF_EXCLUSIVE_WIDTH=1` runs them one at a time, as a flaky latency is looked into.
///
/// ```swift
/// @Suite("Continuation streams", .exclusive)
/// struct StreamTests { … }
/// ```
public struct Exclusive: TestTrait, SuiteTrait, TestScoping {
    /// How much of the machine a test takes.
    public enum Share: Sendable {
        /// One of the two places: one other such test may run beside it.
        case place
        /// Every place: no other such test runs beside it.
        case alone
    }

    let share: Share

    public var isRecursive: Bool { true }

    /// A scope for each test case only: a suite holding places would keep its own tests out. A
    /// test of an `.exclusive` suite marked `.exclusive(.alone)` takes its places once, all of
    /// them: the suite's trait leaves it to the test's (holding one place while waiting for two
    /// would wait for ever beside another such test).
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Exclusive? {
        guard testCase != nil else { return nil }
        if share == .place, test.traits.contains(where: { ($0 as? Exclusive)?.share == .alone }) { return nil }
        return self
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        _ = Self.childrenEndWithTheRun
        let asked = ContinuousClock.now
        try await Self.places.run(places: share == .alone ? Self.places.width : 1) {
            let started = ContinuousClock.now
            if Self.reportsTimes { print("exclusive: began: " + (test.displayName ?? test.name)) }
            let cpuBefore = Self.processorSeconds()
            defer { Self.report(test, waited: started - asked, ran: .now - started, cpu: Self.processorSeconds() - cpuBefore) }
            try await function()
        }
    }
}

extension Exclusive {
    /// The places of the tests so marked, in every test target of the package: two, or
    /// `HANDOFF_EXCLUSIVE_WIDTH`.
    public static let places = TaskLimit(
        width: ProcessInfo.processInfo.environment["HANDOFF_EXCLUSIVE_WIDTH"].flatMap { Int($0) }.map { max($0, 1) } ?? 2)

    /// With `HANDOFF_EXCLUSIVE_TIMES=1`, a line a test: how long it ran once it held its places,
    /// how long it waited for them (swift-testing's own time counts both), and the CPU time the
    /// test process and its reaped children used meanwhile (the test's own only when it ran alone:
    /// `HANDOFF_EXCLUSIVE_WIDTH=1 swift test --no-parallel`), so that where a pass's time goes,
    /// and which tests keep the machine busy, can be read from its log.
    private static let reportsTimes = ProcessInfo.processInfo.environment["HANDOFF_EXCLUSIVE_TIMES"] == "1"

    private static func report(_ test: Test, waited: Duration, ran: Duration, cpu: Double) {
        guard reportsTimes else { return }
        print(String(format: "exclusive: ran %.3f s, cpu %.3f s, waited %.3f s: ", ran / .seconds(1), cpu, waited / .seconds(1))
            + (test.displayName ?? test.name))
    }

    /// User and system time of this process and of its children it has reaped, in seconds.
    private static func processorSeconds() -> Double {
        guard reportsTimes else { return 0 }
        var total = 0.0
        for who in [RUSAGE_SELF.rawValue, RUSAGE_CHILDREN.rawValue] {
            var usage = rusage()
            getrusage(who, &usage)
            for time in [usage.ru_utime, usage.ru_stime] { total += Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        }
        return total
    }

    /// Every `handoff` (and test node, and benchmark role) these tests start ends with the test
    /// process, even when the run is killed or times out (ParentWatch, HANDOFF_EXIT_WITH_PARENT):
    /// nothing is left holding ports and sockets to break the next run. Set once, before the
    /// first such test starts a process (children inherit the environment).
    private static let childrenEndWithTheRun: Void = {
        setenv("HANDOFF_EXIT_WITH_PARENT", "1", 1)
    }()
}

extension Trait where Self == Exclusive {
    /// Runs with at most one other test marked `.exclusive` (``Exclusive``).
    public static var exclusive: Exclusive { Exclusive(share: .place) }

    /// Runs alone among the tests marked `.exclusive`, with `.alone`; or beside one, with `.place`.
    public static func exclusive(_ share: Exclusive.Share) -> Exclusive { Exclusive(share: share) }
}
