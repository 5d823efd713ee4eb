import Foundation
import CZeroMQ
import Glibc

/// How this process's allocator treats the buffers a continuation stream goes through.
///
/// Every chunk of a stream is one allocation of the chunk size (256 KiB by default) made by
/// libzmq as it arrives and freed once read. glibc's defaults hand such blocks back to the kernel
/// as soon as a few are free (its trim threshold follows the largest freed block, so 512 KiB
/// here), and the next chunk then faults fresh, zeroed pages in, one per 4 KiB: measured on this
/// project's 2-core VM, a 1 GiB stream between two processes took 80,000 page faults at its
/// receiving end and ran at half the speed it runs at without them (docs/performance.md).
///
/// ``keepStreamBuffers()`` keeps up to ``trimThreshold`` of freed memory per allocator arena and
/// serves blocks up to ``mmapThreshold`` from the arenas, so a stream's chunks reuse the same
/// pages. The `handoff` command calls it first thing; a program that embeds ``Node`` and streams
/// a lot can call it too. It is process-wide, which is why the library does not call it by itself.
public enum AllocatorTuning {
    /// Freed memory an arena keeps before returning it to the kernel: 16 MiB, four times a default
    /// window (16 chunks of 256 KiB).
    public static let trimThreshold = 16 << 20
    /// Blocks up to this size come from the arenas, not from a mapping of their own: 1 MiB, four
    /// times the default chunk (``Node/Configuration/streamChunkSize``).
    public static let mmapThreshold = 1 << 20

    /// What ``keepStreamBuffers()`` did.
    public enum Outcome: Equatable, Sendable {
        /// The thresholds are set.
        case tuned
        /// `GLIBC_TUNABLES` already sets glibc's malloc options: the operator's choice stands.
        case leftToEnvironment
        /// glibc refused the values.
        case refused
    }

    /// Sets glibc's trim and mmap thresholds (see the type's description), unless the environment
    /// already sets malloc options through `GLIBC_TUNABLES`. Call it once, early, before threads
    /// allocate much.
    @discardableResult
    public static func keepStreamBuffers(environment: [String: String] = ProcessInfo.processInfo.environment) -> Outcome {
        if let tunables = environment["GLIBC_TUNABLES"], tunables.contains("glibc.malloc.") { return .leftToEnvironment }
        // Setting either threshold also turns off glibc's moving of both with the largest block freed.
        guard mallopt(M_TRIM_THRESHOLD, Int32(trimThreshold)) == 1, mallopt(M_MMAP_THRESHOLD, Int32(mmapThreshold)) == 1 else {
            return .refused
        }
        return .tuned
    }

    /// Every thread's allocations from glibc's main arena, for a process whose work is one thread
    /// (a broker), unless the environment already sets malloc options through `GLIBC_TUNABLES`.
    /// Call it before the process starts its second thread: a thread takes its arena with its first
    /// allocation.
    ///
    /// glibc gives each new thread an arena of its own and grows such an arena a page at a time,
    /// each page an `mprotect` call (it keeps no spare room there, where the main arena grows by 128
    /// KiB and more at once). A broker taking a flood of new activities copies each envelope into
    /// its cache, so its thread's arena grew page by page: 6 % of the broker thread's time in
    /// `handoff-bench broker-capacity` went to `mprotect`, and its CPU per message fell from
    /// 2.70–3.21 to 2.37–2.55 µs with one arena (docs/performance.md, "One arena for the broker").
    /// The broker's other threads are libzmq's, which allocate little, so they hardly ever wait on
    /// the arena's lock.
    @discardableResult
    public static func oneArena(environment: [String: String] = ProcessInfo.processInfo.environment) -> Outcome {
        if let tunables = environment["GLIBC_TUNABLES"], tunables.contains("glibc.malloc.") { return .leftToEnvironment }
        return mallopt(M_ARENA_MAX, 1) == 1 ? .tuned : .refused
    }
}
