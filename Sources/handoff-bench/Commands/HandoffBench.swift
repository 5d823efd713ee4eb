// handoff-bench: Handoff measured against raw libzmq doing the same work in the same run, and against
// the peers a user would pick instead (NATS, Redis, a plain TCP socket), started here on loopback.
// Build and run in release: `scripts/bench` (everything), or
// `swift run -c release handoff-bench all|adverts|continue|streams|late-joiner [options]`.

import ArgumentParser
import Foundation
import Handoff
import HandoffExecutor
import ZeroMQ

/// The `handoff-bench` command: a subcommand per benchmark, and hidden ones for the processes a
/// benchmark starts (Roles/).
@main
struct HandoffBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "handoff-bench",
        abstract: "Handoff against raw libzmq, NATS, Redis and TCP doing the same work, in one run.",
        discussion: "Build in release (scripts/bench runs `all`). Every figure is printed beside its baseline, measured in the same run.",
        subcommands: benchmarks + roles
    )

    static let benchmarks: [any ParsableCommand.Type] = [
        AllBenchmarks.self, AdvertsBenchmark.self, AdvertFloorBenchmark.self, ContinueBenchmark.self, StreamsBenchmark.self,
        LateJoinerBenchmark.self, ChecksumBenchmark.self, BecomeCurrentBenchmark.self, SlowReaderBenchmark.self,
        HostileBenchmark.self, StallBenchmark.self, ChurnBenchmark.self, FuzzMemoryBenchmark.self, SubscriptionFloodBenchmark.self, BrokerCapacityBenchmark.self, LivePageBenchmark.self, FleetBenchmark.self,
    ]

    /// Runs the command with every task on the event loops, as the `handoff` command does (task
    /// executor preference, inherited by the child tasks).
    static func main() async {
        // The broker's floor allocates as `handoff broker` does, from glibc's main arena alone
        // (AllocatorTuning.oneArena), set before the process's second thread exists; in an arena of
        // the floor thread's own, each page the cache grows by costs an `mprotect` and a fault the
        // broker does not pay.
        if (try? parseAsRoot()) is BrokerFloorRole { AllocatorTuning.oneArena() }
        // A role started by a benchmark ends with it (HANDOFF_EXIT_WITH_PARENT, set by the benchmark).
        ParentWatch.exitWithParentIfAsked()
        await withTaskExecutorPreference(EventLoops.shared) {
            do {
                var command = try parseAsRoot()
                if var asyncCommand = command as? any AsyncParsableCommand {
                    try await asyncCommand.run()
                } else {
                    try command.run()
                }
            } catch {
                exit(withError: error)
            }
        }
    }
}

/// A benchmark command: prepares the process, prints the banner, runs, then the summary table of
/// every comparison it made.
protocol Benchmark: AsyncParsableCommand {
    var common: CommonOptions { get }
    func measure() async throws
}

extension Benchmark {
    func run() async throws {
        let allocator = common.prepare(Self.configuration.commandName ?? "handoff-bench")
        BenchEnvironment.banner(allocator: allocator)
        let report = Report()
        try await Report.$current.withValue(report) { try await measure() }
        report.printSummary()
    }
}
