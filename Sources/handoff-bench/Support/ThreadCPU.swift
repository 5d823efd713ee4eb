import Foundation

/// One thread of a process as /proc shows it now: its name, the CPU it has run (the first field
/// of /proc/PID/task/TID/schedstat, to the nanosecond, where /proc's stat counts 10 ms ticks), and
/// the minor page faults it took (memory touched for the first time).
struct ThreadReading {
    var name: String
    var cpuNanoseconds: Int
    var minorFaults: Int
}

/// Every thread of `process` (a pid, or `self`) now alive. A thread that ends between two readings
/// drops out of the later one, so read around work whose threads live through it.
func threadReadings(of process: String = "self") -> [ThreadReading] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process)/task")) ?? []
    return tasks.map { task in
        let directory = "/proc/\(process)/task/\(task)"
        let schedstat = (try? String(contentsOfFile: directory + "/schedstat", encoding: .utf8)) ?? ""
        // minflt, the tenth field of stat: the seventh after the name, which ends at the last ')'.
        let stat = (try? String(contentsOfFile: directory + "/stat", encoding: .utf8)) ?? ""
        let afterName = stat.lastIndex(of: ")").map { stat[stat.index(after: $0)...] } ?? ""
        let fields = afterName.split(separator: " ")
        let name = (try? String(contentsOfFile: directory + "/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        return ThreadReading(
            name: name ?? "?", cpuNanoseconds: Int(schedstat.split(separator: " ").first ?? "") ?? 0,
            minorFaults: fields.count > 7 ? Int(fields[7]) ?? 0 : 0)
    }
}

/// CPU nanoseconds each thread of this process has run so far, summed by thread name:
/// `handoff-loop-0`, `ZMQbg/IO/0`…
func cpuByThreadName() -> [String: Int] {
    threadReadings().reduce(into: [:]) { byName, thread in byName[thread.name, default: 0] += thread.cpuNanoseconds }
}

/// What each thread name ran between two readings of ``cpuByThreadName()``, in microseconds per
/// `count` (a round trip, a message), the busiest first; names under 0.05 µs left out.
func cpuPerUnit(from before: [String: Int], to after: [String: Int], count: Int) -> [(thread: String, microseconds: Double)] {
    after.compactMap { name, nanoseconds in
        let perUnit = Double(nanoseconds - (before[name] ?? 0)) / 1_000 / Double(max(1, count))
        return perUnit >= 0.05 ? (name, perUnit) : nil
    }.sorted { $0.microseconds > $1.microseconds }
}
