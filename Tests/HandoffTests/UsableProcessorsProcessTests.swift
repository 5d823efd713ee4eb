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
}
