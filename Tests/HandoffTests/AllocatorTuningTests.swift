import Glibc
import Testing

@testable import Handoff

@Suite struct AllocatorTuningTests {
    @Test func operatorsTunablesStand() {
        let outcome = AllocatorTuning.keepStreamBuffers(environment: ["GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1048576"])
        #expect(outcome == .leftToEnvironment)
    }

    @Test func operatorsTunablesStandForTheArenasToo() {
        let outcome = AllocatorTuning.oneArena(environment: ["GLIBC_TUNABLES": "glibc.malloc.arena_max=4"])
        #expect(outcome == .leftToEnvironment)
    }

    /// A stream's pattern: a window of chunk-sized blocks allocated and written, then freed, over and
    /// over. Under glibc's defaults nearly every page is faulted in afresh each round (measured in C
    /// on this machine kind: 198,483 faults for 204,800 page writes); tuned, the pages are reused.
    @Test func streamBuffersReuseTheirPages() {
        #expect(AllocatorTuning.keepStreamBuffers(environment: [:]) == .tuned)
        let chunk = 256 << 10, window = 16, rounds = 200
        var blocks = [UnsafeMutableRawPointer?](repeating: nil, count: window)
        let before = minorFaults()
        for round in 0..<rounds {
            for index in 0..<window {
                blocks[index] = malloc(chunk)
                memset(blocks[index]!, Int32(round & 0xFF), chunk)
            }
            for index in 0..<window { free(blocks[index]) }
        }
        let faults = minorFaults() - before
        let pageWrites = rounds * window * chunk / 4096
        // Other tests may run meanwhile and fault pages of their own: far below the untuned figure
        // is what counts.
        #expect(faults < pageWrites / 10, "\(faults) page faults for \(pageWrites) page writes")
    }

    private func minorFaults() -> Int {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return usage.ru_minflt
    }
}
