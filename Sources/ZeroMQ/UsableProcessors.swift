import Foundation

/// How many CPUs this process may use: the fewest of the host's, its affinity's (`taskset`, a
/// cpuset) and the CPU quotas on its cgroup and those above it (`docker --cpus`, systemd's
/// `CPUQuota=` on a service or its slice), at least one.
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

    /// The CPUs the quotas on the process's cgroups give (``cgroupQuota(cgroups:read:)``), read
    /// from /proc/self/cgroup and /sys/fs/cgroup.
    private static func cgroupQuota() -> Int? {
        let read = { (path: String) in try? String(contentsOfFile: path, encoding: .utf8) }
        return cgroupQuota(cgroups: read("/proc/self/cgroup") ?? "", read: read)
    }

    /// The fewest CPUs a quota gives on the way from the process's cgroup up to the root its
    /// namespace sees: a parent's quota (a systemd slice's `CPUQuota=`, a pod's limit) binds every
    /// cgroup under it, and a child's own cpu.max then says "max". cgroup v2's `cpu.max` at each
    /// level (the `0::` line of `cgroups`, /proc/self/cgroup), and v1's CFS quota the same way
    /// under the cpu controller's mount (its `cpu` line; a hybrid host has both); `nil` for none.
    /// `read` reads a file, `nil` when it cannot.
    static func cgroupQuota(cgroups: String, read: (String) -> String?) -> Int? {
        var fewest: Int?
        func take(_ cpus: Int?) {
            if let cpus { fewest = min(fewest ?? cpus, cpus) }
        }
        let lines = cgroups.split(separator: "\n")
        if let line = lines.first(where: { $0.hasPrefix("0::") }) {
            for folder in levels(of: String(line.dropFirst(3)), under: "/sys/fs/cgroup") {
                take(read(folder + "/cpu.max").flatMap(cpus(cpuMax:)))
            }
        }
        // v1: "ID:cpu,cpuacct:/path", mounted at /sys/fs/cgroup/cpu,cpuacct (and its links).
        func number(_ path: String) -> Int? { read(path).flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } }
        for line in lines {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3, fields[1].split(separator: ",").contains("cpu") else { continue }
            // "cpu" is mounted under its own name, or linked there from "cpu,cpuacct": read once.
            for mount in fields[1] == "cpu" ? ["/sys/fs/cgroup/cpu"] : ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/\(fields[1])"] {
                for folder in levels(of: String(fields[2]), under: mount) {
                    if let quota = number(folder + "/cpu.cfs_quota_us"), let period = number(folder + "/cpu.cfs_period_us") {
                        take(cpus(quota: quota, period: period))
                    }
                }
            }
        }
        return fewest
    }

    /// `root` + `path`, then each folder above it up to `root`: "/a/b" under "/r" is "/r/a/b",
    /// "/r/a", "/r". A path with ".." (a cgroup outside the namespace's view) gives the root alone.
    static func levels(of path: String, under root: String) -> [String] {
        let parts = path.split(separator: "/").map(String.init)
        guard !parts.contains("..") else { return [root] }
        return (0...parts.count).reversed().map { count in ([root] + parts.prefix(count)).joined(separator: "/") }
    }
}
