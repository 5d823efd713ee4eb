import Foundation

/// CPU nanoseconds each thread of this process has run so far (the first field of
/// /proc/self/task/TID/schedstat: to the nanosecond, where /proc's stat counts 10 ms ticks), summed
/// by thread name: `handoff-loop-0`, `ZMQbg/IO/0`… A thread that ends between two readings drops
/// out of the later one, so read around work whose threads live through it.
func cpuByThreadName() -> [String: Int] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    var byName: [String: Int] = [:]
    for task in tasks {
        let schedstat = (try? String(contentsOfFile: "/proc/self/task/\(task)/schedstat", encoding: .utf8)) ?? ""
        let nanoseconds = Int(schedstat.split(separator: " ").first ?? "") ?? 0
        let name = (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
        byName[name, default: 0] += nanoseconds
    }
    return byName
}

/// What each thread name ran between two readings of ``cpuByThreadName()``, in microseconds per
/// `count` (a round trip, a message), the busiest first; names under 0.05 µs left out.
func cpuPerUnit(from before: [String: Int], to after: [String: Int], count: Int) -> [(thread: String, microseconds: Double)] {
    after.compactMap { name, nanoseconds in
        let perUnit = Double(nanoseconds - (before[name] ?? 0)) / 1_000 / Double(max(1, count))
        return perUnit >= 0.05 ? (name, perUnit) : nil
    }.sorted { $0.microseconds > $1.microseconds }
}
