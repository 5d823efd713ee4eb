import Foundation
import Testing
@testable import ZeroMQ
import HandoffTestSupport

/// ``UsableProcessors`` against the kernel's own format, in a process held to one CPU.
@Suite("The CPUs a process may use, read from a process held to one", .exclusive)
struct UsableProcessorsProcessTests {
    @Test("a process held to one CPU by taskset reads one from its /proc status; this process reads between one and the host's count")
    func heldToOneCPU() async throws {
        #expect((1...ProcessInfo.processInfo.activeProcessorCount).contains(UsableProcessors.count))
        let taskset = "/usr/bin/taskset"
        try #require(FileManager.default.isExecutableFile(atPath: taskset), "taskset (util-linux) is not installed")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: taskset)
        process.arguments = ["-c", "0", "cat", "/proc/self/status"]
        let output = Spawning.pipe()
        process.standardOutput = output
        try process.spawn()
        defer { reap(process) }
        let status = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(UsableProcessors.allowedCPUs(inStatus: status) == 1, "\(status)")
    }

    /// A cgroup of its own with a one-CPU quota and a child cgroup without one, in cgroup v1's cpu
    /// controller or v2's (whichever this host lets root write), removed after `body`.
    private func withQuotaOnTheParent(_ body: (_ child: String) throws -> Void) throws {
        let name = "handoff-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let manager = FileManager.default
        let write = { (text: String, file: String) throws in try text.write(toFile: file, atomically: false, encoding: .utf8) }
        let parent: String
        if manager.fileExists(atPath: "/sys/fs/cgroup/cpu/cpu.cfs_quota_us") {
            parent = "/sys/fs/cgroup/cpu/\(name)"
            try manager.createDirectory(atPath: parent, withIntermediateDirectories: false)
            try write("100000", parent + "/cpu.cfs_period_us")
            try write("100000", parent + "/cpu.cfs_quota_us")
        } else {
            let controllers = (try? String(contentsOfFile: "/sys/fs/cgroup/cgroup.controllers", encoding: .utf8)) ?? ""
            try #require(controllers.split(whereSeparator: \.isWhitespace).contains("cpu"), "no cgroup cpu controller, v1 or v2, on this host")
            try? write("+cpu", "/sys/fs/cgroup/cgroup.subtree_control")
            parent = "/sys/fs/cgroup/\(name)"
            try manager.createDirectory(atPath: parent, withIntermediateDirectories: false)
            try write("100000 100000", parent + "/cpu.max")
        }
        let child = parent + "/inner"
        defer { rmdir(child); rmdir(parent) }
        try manager.createDirectory(atPath: child, withIntermediateDirectories: false)
        try body(child)
    }

    @Test("a process in a cgroup whose parent holds it to one CPU reads one: the quota of a cgroup above binds it (a systemd slice's, a pod's), its own says none", .enabled(if: geteuid() == 0, "creating cgroups takes root"))
    func heldToOneCPUByTheParentCgroup() throws {
        try #require(ProcessInfo.processInfo.activeProcessorCount >= 2, "a host of one CPU reads one whatever the quota")
        try withQuotaOnTheParent { child in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            // Into the child cgroup before the program starts: it reads its cgroups once.
            process.arguments = ["-c", "echo $$ > \"$0/cgroup.procs\" && exec \"$1\" usable-processors", child, ChildProcess.testNodeURL.path]
            let output = Spawning.pipe()
            process.standardOutput = output
            try process.spawn()
            defer { reap(process) }
            let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            #expect(said == "1\n", "read \(said.debugDescription) in \(child)")
        }
    }
}
