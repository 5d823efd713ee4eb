import Foundation

/// The span a benchmark measures, told to perf: `perf record --control fifo:PATH -D -1` starts with
/// its counters off, and a run with HANDOFF_BENCH_PERF_FIFO=PATH turns them on for each measured
/// span only, so a profile holds what the figures hold and not the set-up and tear-down around them
/// (a node's tear-down withdrawing tens of thousands of activities was a tenth of a whole-run
/// profile). Without the variable both calls do nothing. deploy/perf/profile-span.sh drives it.
enum MeasuredSpan {
    static func begin() { tell("enable") }
    static func end() { tell("disable") }

    private static let fifo = ProcessInfo.processInfo.environment["HANDOFF_BENCH_PERF_FIFO"]

    private static func tell(_ command: String) {
        guard let fifo else { return }
        let descriptor = open(fifo, O_WRONLY)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        let line = Array((command + "\n").utf8)
        _ = line.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }
}
