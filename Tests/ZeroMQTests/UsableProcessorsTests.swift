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

    @Test("rule: a quota anywhere between the process's cgroup and the root binds it (the fewest CPUs wins), in cgroup v2 and v1 alike; none when every level says max")
    func quotasUpTheTree() {
        func quota(_ cgroups: String, _ files: [String: String]) -> Int? {
            UsableProcessors.cgroupQuota(cgroups: cgroups, read: { files[$0] })
        }
        // v2: the service's own cpu.max says max; its slice's quota binds it.
        let v2 = "0::/system.slice/handoff.service\n"
        #expect(quota(v2, [
            "/sys/fs/cgroup/system.slice/handoff.service/cpu.max": "max 100000\n",
            "/sys/fs/cgroup/system.slice/cpu.max": "300000 100000\n",
        ]) == 3)
        #expect(quota(v2, [
            "/sys/fs/cgroup/system.slice/handoff.service/cpu.max": "100000 100000\n",
            "/sys/fs/cgroup/system.slice/cpu.max": "300000 100000\n",
        ]) == 1)
        #expect(quota(v2, ["/sys/fs/cgroup/system.slice/handoff.service/cpu.max": "max 100000", "/sys/fs/cgroup/cpu.max": "max 100000"]) == nil)
        // A container's namespace: its cgroup is "/", the root's cpu.max is its own.
        #expect(quota("0::/\n", ["/sys/fs/cgroup/cpu.max": "250000 100000"]) == 3)
        #expect(quota("0::/../outside\n", ["/sys/fs/cgroup/cpu.max": "100000 100000", "/sys/fs/cgroup/outside/cpu.max": "1 1"]) == 1)
        // v1 (a hybrid host: both), the quota on the parent; -1 means none.
        let v1 = "4:memory:/x\n3:cpu,cpuacct:/kubepods/pod1/c1\n0::/\n"
        #expect(quota(v1, [
            "/sys/fs/cgroup/cpu/kubepods/pod1/c1/cpu.cfs_quota_us": "-1\n",
            "/sys/fs/cgroup/cpu/kubepods/pod1/c1/cpu.cfs_period_us": "100000\n",
            "/sys/fs/cgroup/cpu/kubepods/pod1/cpu.cfs_quota_us": "200000\n",
            "/sys/fs/cgroup/cpu/kubepods/pod1/cpu.cfs_period_us": "100000\n",
        ]) == 2)
        #expect(quota(v1, ["/sys/fs/cgroup/cpu,cpuacct/kubepods/cpu.cfs_quota_us": "50000", "/sys/fs/cgroup/cpu,cpuacct/kubepods/cpu.cfs_period_us": "100000"]) == 1)
        #expect(quota(v1, [:]) == nil)
        #expect(UsableProcessors.levels(of: "/a/b", under: "/r") == ["/r/a/b", "/r/a", "/r"])
        #expect(UsableProcessors.levels(of: "/", under: "/r") == ["/r"])
    }
}
