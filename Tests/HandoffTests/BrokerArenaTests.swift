import Foundation
import HandoffTestSupport
import Testing


@Suite("A broker's allocations in one arena (AllocatorTuning.oneArena)", .exclusive)
struct BrokerArenaTests {
    @Test("a `handoff broker` process allocates from glibc's main arena alone, where an agent's threads each have an arena of their own")
    func brokerAllocatesFromOneArena() async throws {
        let ports = try freePorts(2)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arena-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (broker, _) = try await startServingMetrics(
            ["broker", "--frontend", ports[0], "--backend", ports[1]], log: folder.appendingPathComponent("broker.log"))
        defer { reap(broker) }
        let (agent, agentPort) = try await startServingMetrics(
            ["agent", "--name", "arena", "--broker", ports[0], ports[1], "--data", folder.appendingPathComponent("agent").path,
             "--control", "ipc://\(folder.path)/agent.sock"],
            log: folder.appendingPathComponent("agent.log"))
        defer { reap(agent) }
        // Healthy once the agent's presence has come back through the broker: every thread of
        // both has allocated by then (each takes its arena with its first allocation).
        #expect(await eventually(within: .seconds(15)) { healthStatus(agentPort) == 200 })

        let agentHeaps = try arenaHeaps(of: agent.processIdentifier)
        let brokerHeaps = try arenaHeaps(of: broker.processIdentifier)
        // The agent's count shows that the heaps are found where they exist.
        #expect(agentHeaps > 0, "no arena heap found in the agent's mappings")
        #expect(brokerHeaps == 0, "the broker has \(brokerHeaps) arena heaps besides the main one")
    }

    /// glibc's arenas besides the main one, in a process's mappings: each lives in heaps of its
    /// own, anonymous mappings aligned to their 64 MiB maximum size (`new_heap`).
    private func arenaHeaps(of pid: Int32) throws -> Int {
        let maps = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)
        return maps.split(separator: "\n").count { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count == 5, let dash = fields[0].firstIndex(of: "-"),
                  let start = UInt64(fields[0][..<dash], radix: 16) else { return false }
            return start % (64 << 20) == 0
        }
    }
}
