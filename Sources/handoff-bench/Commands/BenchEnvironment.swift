import ArgumentParser
import CHandoffChecksum
import Foundation
import Handoff
import HandoffExecutor
import Logging
import ZeroMQ

/// What every benchmark command takes.
struct CommonOptions: ParsableArguments {
    @Option(help: "End the run with a message after this many seconds: a stage that waits for ever (a node that never sees what it waits for) fails instead of holding the run.")
    var timeout = 1_800
    @Option(help: ArgumentHelp("`default` leaves glibc's allocator as it is in every process of the run (the children inherit it) instead of the handoff command's tuning.", valueName: "default"))
    var malloc: String?

    /// Prepares the process (``BenchEnvironment/prepare(mallocDefault:timeout:stage:)``).
    func prepare(_ stage: String) -> AllocatorTuning.Outcome {
        BenchEnvironment.prepare(mallocDefault: malloc == "default", timeout: timeout, stage: stage)
    }
}

/// How every process of a run is set up, the benchmark's and its children's alike.
enum BenchEnvironment {
    /// Every role, Handoff's and the baselines' alike, runs with the allocator the `handoff` command
    /// uses (AllocatorTuning) unless `--malloc default` (or, in a child, `HANDOFF_BENCH_MALLOC`);
    /// figures go to standard output, the nodes' warnings and worse to standard error; after
    /// `timeout` seconds the process ends with a message.
    static func prepare(mallocDefault requested: Bool, timeout: Int, stage: String) -> AllocatorTuning.Outcome {
        let mallocDefault = requested || ProcessInfo.processInfo.environment["HANDOFF_BENCH_MALLOC"] == "default"
        let allocator = mallocDefault ? AllocatorTuning.Outcome.leftToEnvironment : AllocatorTuning.keepStreamBuffers()
        if mallocDefault {
            setenv("HANDOFF_BENCH_MALLOC", "default", 1)
            // A malloc tunable at its default value: `handoff` processes started by this one (agents,
            // brokers) then leave glibc's allocator as it is, too (AllocatorTuning yields to GLIBC_TUNABLES).
            if ProcessInfo.processInfo.environment["GLIBC_TUNABLES"] == nil { setenv("GLIBC_TUNABLES", "glibc.malloc.tcache_count=7", 1) }
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .warning
            return handler
        }
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: TimeInterval(timeout))
            FileHandle.standardError.write(Data("handoff-bench: \(stage) did not finish within \(timeout) s (--timeout): a stage waits for something that never comes\n".utf8))
            exit(3)
        }
        return allocator
    }

    /// The machine, the library and how the processes run, above every benchmark's figures.
    static func banner(allocator: AllocatorTuning.Outcome) {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let memory = Double(ProcessInfo.processInfo.physicalMemory) / 1_073_741_824
        let cpuInfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        func field(_ name: String) -> String? {
            cpuInfo.split(separator: "\n").first { $0.hasPrefix(name) }?.split(separator: ":").last?.trimmingCharacters(in: .whitespaces)
        }
        // A VM's model name is often only "AMD EPYC": the family and model tell the generation, and
        // the checksum path how fast a stream's CRC can be, so figures from two machines compare.
        let generation = field("cpu family").map { family in " (family \(family), model \(field("model") ?? "?"))" } ?? ""
        let crc = crc32cImplementationNames[handoff_crc32c_implementation()] ?? "?"
        print("handoff-bench on \(ProcessInfo.processInfo.hostName): \(field("model name") ?? "unknown CPU")\(generation), \(cores) cores, \(String(format: "%.0f", memory)) GiB; libzmq \(ZeroMQLibrary.version.major).\(ZeroMQLibrary.version.minor).\(ZeroMQLibrary.version.patch); CRC-32C by \(crc)")
        print(allocator == .tuned
            ? "allocator: every process as the handoff command runs (AllocatorTuning: trim \(AllocatorTuning.trimThreshold >> 20) MiB, mmap \(AllocatorTuning.mmapThreshold >> 20) MiB)"
            : "allocator: glibc's defaults or GLIBC_TUNABLES (--malloc default)")
        print("tasks: on Handoff's event loops in every process (\(EventLoops.shared.threadCount) each here), as the handoff command runs (EventLoops)")
        #if DEBUG
        print("warning: a debug build; figures mean little. Build with -c release (scripts/bench does).")
        #endif
    }
}
