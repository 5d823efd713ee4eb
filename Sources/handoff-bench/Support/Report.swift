import Foundation
import Synchronization

/// One comparison made in this run, for the closing table.
struct Comparison {
    var what: String
    var handoff: String
    var baseline: String
    var baselineValue: String
    var ratio: String
    var target: String
    /// Whether the target was reached; `nil` when there is no target.
    var met: Bool?
}

/// The comparisons a command's benchmarks make, printed as one table at its end.
final class Report: Sendable {
    /// The running command's report (each command runs its benchmarks with a report of its own).
    @TaskLocal static var current = Report()

    private let comparisons = Mutex<[Comparison]>([])

    func add(_ comparison: Comparison) {
        comparisons.withLock { $0.append(comparison) }
    }

    /// The table of every comparison made, if any.
    func printSummary() {
        let comparisons = comparisons.withLock { $0 }
        guard !comparisons.isEmpty else { return }
        print("")
        print("Summary (Handoff against each baseline, same machine, same run)")
        let header = ["measurement", "Handoff", "baseline", "baseline's", "ratio", "target", ""]
        let rows = [header] + comparisons.map { c in
            [c.what, c.handoff, c.baseline, c.baselineValue, c.ratio, c.target, c.met.map { $0 ? "met" : "NOT met" } ?? ""]
        }
        let widths = (0..<header.count).map { column in rows.map { $0[column].count }.max() ?? 0 }
        for (index, row) in rows.enumerated() {
            print(zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  "))
            if index == 0 { print(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")) }
        }
    }
}

/// Records a comparison in the running command's report.
func compare(_ what: String, handoff: String, baseline: String, _ baselineValue: String, ratio: String, target: String = "", met: Bool? = nil) {
    Report.current.add(Comparison(what: what, handoff: handoff, baseline: baseline, baselineValue: baselineValue, ratio: ratio, target: target, met: met))
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

func row(_ name: String, _ value: String, _ detail: String = "") {
    print(name.padding(toLength: 52, withPad: " ", startingAt: 0) + value.padding(toLength: 14, withPad: " ", startingAt: 0) + detail)
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

/// Each run's seconds, in the order run: how far apart they lie says how much the median is worth.
func runTimes(_ seconds: [Double]) -> String {
    seconds.map { String(format: "%.3f", $0) }.joined(separator: " ")
}

/// The median, then every run (``runTimes(_:)``).
func medianAndRuns(_ seconds: [Double]) -> String {
    String(format: "%.3f; ", median(seconds)) + runTimes(seconds)
}
