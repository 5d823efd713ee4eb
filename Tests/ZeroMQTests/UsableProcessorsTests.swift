import Foundation
import Testing
@testable import ZeroMQ

/// How many CPUs the process may use (``UsableProcessors``): its affinity and its cgroup's quota,
/// which `ProcessInfo.activeProcessorCount` does not read.
@Suite("The CPUs a process may use")
struct UsableProcessorsTests {
    @Test("rule: /proc's Cpus_allowed mask counts its bits, in comma-split groups; a quota is CPUs rounded up, none when unlimited or unreadable")
    func parsing() {
        #expect(UsableProcessors.allowedCPUs(inStatus: "Name:\tx\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\n") == 2)
        #expect(UsableProcessors.allowedCPUs(inStatus: "Cpus_allowed:\tff,ffffffff\n") == 40)
        #expect(UsableProcessors.allowedCPUs(inStatus: "Cpus_allowed:\t00000000,00000001") == 1)
        #expect(UsableProcessors.allowedCPUs(inStatus: "Cpus_allowed:\t0") == nil)
        #expect(UsableProcessors.allowedCPUs(inStatus: "Name:\tx\n") == nil)
        #expect(UsableProcessors.allowedCPUs(inStatus: "Cpus_allowed:\tzz") == nil)
        #expect(UsableProcessors.cpus(cpuMax: "max 100000\n") == nil)
        #expect(UsableProcessors.cpus(cpuMax: "150000 100000\n") == 2)
        #expect(UsableProcessors.cpus(cpuMax: "50000 100000") == 1)
        #expect(UsableProcessors.cpus(quota: -1, period: 100_000) == nil)
        #expect(UsableProcessors.cpus(quota: 400_000, period: 100_000) == 4)
    }
}
