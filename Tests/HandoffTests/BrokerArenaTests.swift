import Foundation
import HandoffTestSupport
import Testing

@Suite("A broker's allocations in one arena (AllocatorTuning.oneArena)", .exclusive)
struct BrokerArenaTests {
    @Test("a `handoff broker` process allocates from glibc's main arena alone, where an agent's threads each have an arena of their own")
    func brokerAllocatesFromOneArena() async throws {
        let deployment = try await ServedDeployment.start(agents: ["arena"])
        defer { deployment.stop() }
        // Healthy once the agent's presence has come back through the broker: every thread of
        // both has allocated by then (each takes its arena with its first allocation).
        #expect(await deployment.untilHealthy())
        let (agent, broker) = (deployment.agent("arena").process, deployment.broker)

        let agentHeaps = try arenaHeaps(of: agent.processIdentifier)
        let brokerHeaps = try arenaHeaps(of: broker.processIdentifier)
        // The agent's count shows that the heaps are found where they exist.
        #expect(agentHeaps > 0, "no arena heap found in the agent's mappings")
        #expect(brokerHeaps == 0, "the broker has \(brokerHeaps) arena heaps besides the main one")
    }

    /// glibc's arenas besides the main one, in a process's mappings: each lives in heaps of its
    /// own, 64 MiB reserved at an address aligned to 64 MiB (`new_heap`), the part in use
    /// read-write and the rest inaccessible, so the anonymous mappings from the aligned start end
    /// exactly 64 MiB later. (An aligned start alone was once met by some other mapping, by chance,
    /// in a fresh-clone CI run.)
    private func arenaHeaps(of pid: Int32) throws -> Int {
        let maps = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)
        let anonymous: [(start: UInt64, end: UInt64)] = maps.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count == 5, let dash = fields[0].firstIndex(of: "-"),
                  let start = UInt64(fields[0][..<dash], radix: 16),
                  let end = UInt64(fields[0][fields[0].index(after: dash)...], radix: 16) else { return nil }
            return (start, end)
        }
        let heap: UInt64 = 64 << 20
        return anonymous.indices.count { index in
            let start = anonymous[index].start
            guard start % heap == 0 else { return false }
            // The heap's mappings, one after another from its start.
            var end = anonymous[index].end
            var next = index + 1
            while end < start + heap, next < anonymous.count, anonymous[next].start == end {
                end = anonymous[next].end
                next += 1
            }
            return end == start + heap
        }
    }
}
