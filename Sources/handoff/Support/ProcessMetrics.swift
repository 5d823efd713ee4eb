import Foundation
import Handoff
import Prometheus
import Synchronization

/// The `process_*` metrics every Prometheus client library exports (client_golang's process
/// collector: the same names, types and help), read from `/proc` at each scrape, and
/// `handoff_build_info`.
///
/// Dashboards and alerts written for any exporter (CPU, memory, file descriptors near their limit,
/// restarts from the start time) work on a broker and an agent unchanged.
final class ProcessMetrics: Sendable {
    private let cpu: Counter
    private let resident: Gauge
    private let virtual: Gauge
    private let openFDs: Gauge
    private let maxFDs: Gauge
    private let startTime: Gauge
    /// The CPU seconds already added to ``cpu`` (a counter only goes up, by differences).
    private let reportedCPU = Mutex<Double>(0)

    init(registry: PrometheusCollectorRegistry) {
        cpu = registry.makeCounter(descriptor: DescribedMetricsFactory.descriptor("process_cpu_seconds_total", help: "Total user and system CPU time spent in seconds."))
        resident = registry.makeGauge(descriptor: DescribedMetricsFactory.descriptor("process_resident_memory_bytes", help: "Resident memory size in bytes."))
        virtual = registry.makeGauge(descriptor: DescribedMetricsFactory.descriptor("process_virtual_memory_bytes", help: "Virtual memory size in bytes."))
        openFDs = registry.makeGauge(descriptor: DescribedMetricsFactory.descriptor("process_open_fds", help: "Number of open file descriptors."))
        maxFDs = registry.makeGauge(descriptor: DescribedMetricsFactory.descriptor("process_max_fds", help: "Maximum number of open file descriptors."))
        startTime = registry.makeGauge(descriptor: DescribedMetricsFactory.descriptor("process_start_time_seconds", help: "Start time of the process since unix epoch in seconds."))
        // The build never changes while the process runs: one sample, always 1, its labels the values.
        registry.makeGauge(
            descriptor: DescribedMetricsFactory.descriptor(
                "handoff_build_info",
                help: "The running build: its release (version), wire protocol (wire), plugin ABI (abi) and the libzmq it runs with; always 1."),
            labels: [("version", HandoffVersion.release), ("wire", HandoffVersion.wire),
                     ("abi", HandoffVersion.abi), ("libzmq", HandoffVersion.libzmq)]
        ).set(to: 1)
        update()
    }

    /// Reads `/proc` into the metrics; called before each scrape is written.
    func update() {
        if let stat = ProcessStat.read() {
            let seconds = stat.cpuSeconds
            let added = reportedCPU.withLock { reported -> Double in
                let added = max(0, seconds - reported)
                reported += added
                return added
            }
            if added > 0 { cpu.increment(by: added) }
            resident.set(to: Double(stat.residentBytes))
            virtual.set(to: Double(stat.virtualBytes))
            if let start = stat.startTime { startTime.set(to: start) }
        }
        // Not FileManager's listing of /proc/self/fd: a broker holds thousands (``OpenDescriptors``).
        if let descriptors = OpenDescriptors.count() { openFDs.set(to: Double(descriptors)) }
        var limit = rlimit()
        if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 { maxFDs.set(to: Double(limit.rlim_cur)) }
    }
}

/// The fields of `/proc/self/stat` (proc(5)) the process metrics need.
struct ProcessStat {
    var cpuSeconds: Double
    var virtualBytes: Int
    var residentBytes: Int
    /// Seconds since the epoch, or `nil` when the boot time is unknown.
    var startTime: Double?

    static func read() -> ProcessStat? {
        guard let text = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8) else { return nil }
        return parse(text, bootTime: bootTime())
    }

    /// Parses the line: the command (field 2) is in parentheses and may hold spaces and
    /// parentheses itself, so the fields are counted from after the last `)`.
    static func parse(_ text: String, bootTime: Double?) -> ProcessStat? {
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state): field n is fields[n - 3].
        func field(_ number: Int) -> Double? {
            number - 3 < fields.count ? Double(fields[number - 3].trimmingCharacters(in: .whitespacesAndNewlines)) : nil
        }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        guard ticks > 0, let user = field(14), let system = field(15), let start = field(22),
              let virtual = field(23), let resident = field(24) else { return nil }
        return ProcessStat(
            cpuSeconds: (user + system) / ticks, virtualBytes: Int(virtual),
            residentBytes: Int(resident) * Int(sysconf(Int32(_SC_PAGESIZE))),
            startTime: bootTime.map { $0 + start / ticks })
    }

    /// The boot time, seconds since the epoch (`btime` in `/proc/stat`).
    static func bootTime() -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst("btime ".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}
