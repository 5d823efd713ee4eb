import Foundation

/// How many CPUs this process may use: the fewest of the host's, its affinity's (`taskset`, a
/// cpuset) and its cgroup's CPU quota (`docker --cpus`, systemd's `CPUQuota=`), at least one.
/// `ProcessInfo.activeProcessorCount` reads the host's alone: under `taskset -c 0` it still said 2.
public enum UsableProcessors {
    /// Read once, at first use.
    public static let count: Int = {
        var count = ProcessInfo.processInfo.activeProcessorCount
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8), let allowed = allowedCPUs(inStatus: status) {
            count = min(count, allowed)
        }
        if let quota = cgroupQuota() { count = min(count, quota) }
        return max(1, count)
    }()

    /// The CPUs `Cpus_allowed:` in /proc/PID/status allows: a hexadecimal mask in groups of eight
    /// digits split by commas; `nil` without the line or with no CPU in it.
    static func allowedCPUs(inStatus status: String) -> Int? {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Cpus_allowed:") }) else { return nil }
        var count = 0
        for digit in line.dropFirst("Cpus_allowed:".count) where !digit.isWhitespace && digit != "," {
            guard let value = digit.hexDigitValue else { return nil }
            count += value.nonzeroBitCount
        }
        return count > 0 ? count : nil
    }

    /// CPUs a quota of `quota` µs in every `period` µs gives, rounded up; `nil` for none.
    static func cpus(quota: Int, period: Int) -> Int? {
        quota > 0 && period > 0 ? (quota + period - 1) / period : nil
    }

    /// cgroup v2's `cpu.max`: "QUOTA PERIOD", or "max PERIOD" for no quota.
    static func cpus(cpuMax text: String) -> Int? {
        let fields = text.split(whereSeparator: \.isWhitespace)
        guard fields.count == 2, let quota = Int(fields[0]), let period = Int(fields[1]) else { return nil }
        return cpus(quota: quota, period: period)
    }

    /// The CPUs the process's cgroup's quota gives: v2 (its own cgroup, then the root a container
    /// sees), else v1's CFS quota; `nil` when there is none.
    private static func cgroupQuota() -> Int? {
        let read = { (path: String) in try? String(contentsOfFile: path, encoding: .utf8) }
        let own = read("/proc/self/cgroup")?.split(separator: "\n").first { $0.hasPrefix("0::") }.map { String($0.dropFirst(3)) }
        for path in [own.map { "/sys/fs/cgroup\($0)/cpu.max" }, "/sys/fs/cgroup/cpu.max"].compactMap(\.self) {
            if let text = read(path) { return cpus(cpuMax: text) }
        }
        let number = { (path: String) in read(path).flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } }
        guard let quota = number("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), let period = number("/sys/fs/cgroup/cpu/cpu.cfs_period_us") else { return nil }
        return cpus(quota: quota, period: period)
    }
}
