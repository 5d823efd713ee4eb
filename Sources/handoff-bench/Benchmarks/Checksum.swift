import CHandoffChecksum
import Foundation

// CRC-32C, the check every stream chunk pays on both ends (the writer copies and checksums in one
// pass, the reader checksums), against the copy a raw transfer makes anyway: libc's memcpy. Then
// the other two a writer may end with (Node.Configuration.streamChecksum): XXH64 and SHA-256.

/// What each CRC-32C implementation is called in the figures (and in every run's banner).
let crc32cImplementationNames = [HANDOFF_CRC32C_TABLES: "tables", HANDOFF_CRC32C_LANES: "three crc32 lanes (SSE4.2)",
                                 HANDOFF_CRC32C_FOLDING_256: "folding (AVX2 VPCLMULQDQ)", HANDOFF_CRC32C_FOLDING_512: "folding (AVX-512 VPCLMULQDQ)"]

/// `checksum`: each implementation this CPU runs over stream-sized chunks, in cache (one chunk
/// again and again) and from memory (a buffer far larger than the caches, chunk after chunk).
func benchChecksum(chunkKiB: Int, mebibytes: Int) {
    let chunk = chunkKiB * 1024
    let total = mebibytes << 20
    let spanBytes = 256 << 20
    let source = UnsafeMutableRawBufferPointer.allocate(byteCount: spanBytes, alignment: 64)
    let destination = UnsafeMutableRawBufferPointer.allocate(byteCount: spanBytes, alignment: 64)
    defer { source.deallocate(); destination.deallocate() }
    var generator = SystemRandomNumberGenerator()
    for index in stride(from: 0, to: spanBytes, by: 8) { source.storeBytes(of: generator.next() as UInt64, toByteOffset: index, as: UInt64.self) }
    memset(destination.baseAddress!, 0, spanBytes)  // fault every page in before timing

    let names = crc32cImplementationNames
    let best = handoff_crc32c_implementation()
    print("CRC-32C over \(chunk / 1024) KiB chunks, \(total >> 20) MiB each; GB/s; this CPU's fastest: \(names[best] ?? "?")")
    print("(in cache: the same chunk again and again; from memory: chunk after chunk through \(spanBytes >> 20) MiB)")

    /// GB/s of `work` over `amount` bytes (`total` unless given), chunk by chunk at each `offset`;
    /// the best of three.
    func rate(span: Int, over given: Int? = nil, _ work: (Int) -> UInt32) -> Double {
        let amount = given ?? total
        var highest = 0.0
        for _ in 0..<3 {
            var sink: UInt32 = 0
            let started = ContinuousClock.now
            var done = 0, offset = 0
            while done < amount {
                sink ^= work(offset)
                done += chunk
                offset = offset + chunk >= span ? 0 : offset + chunk
            }
            let elapsed = seconds(ContinuousClock.now - started)
            if sink == 0x1234_5678 { print("") }  // keeps the work
            highest = max(highest, Double(amount) / elapsed / 1e9)
        }
        return highest
    }
    let source0 = source.baseAddress!, destination0 = destination.baseAddress!
    for (label, span) in [("in cache", chunk), ("from memory", spanBytes)] {
        let copy = rate(span: span) { offset in
            memcpy(destination0 + offset, source0 + offset, chunk)
            return destination0.load(fromByteOffset: offset, as: UInt32.self)
        }
        row("memcpy, \(label) (the baseline)", String(format: "%.1f", copy))
        // The tables (any CPU) are measured only where nothing faster runs: 2.4 GB/s in cache here.
        for implementation in min(best, HANDOFF_CRC32C_LANES)...best {
            let name = names[implementation] ?? "?"
            let check = rate(span: span) { handoff_crc32c_using(implementation, 0, source0 + $0, chunk) }
            let copying = rate(span: span) { handoff_crc32c_copy_using(implementation, 0, destination0 + $0, source0 + $0, chunk) }
            row("  checksum, \(name)", String(format: "%.1f", check), String(format: "%.2f x memcpy", check / copy))
            row("  copy + checksum, \(name)", String(format: "%.1f", copying), String(format: "%.2f x memcpy", copying / copy))
            if implementation == best, label == "from memory" {
                compare("CRC-32C copy + check, from memory (GB/s)", handoff: String(format: "%.1f", copying), baseline: "memcpy alone",
                        String(format: "%.1f", copy), ratio: String(format: "%.0f %%", 100 * copying / copy))
            }
        }
        // A writer that ends in these copies first, then hashes: the check alone is what they add.
        var xxh = handoff_xxh64()
        let xxh64 = rate(span: span) { offset in
            handoff_xxh64_init(&xxh)
            handoff_xxh64_update(&xxh, source0 + offset, chunk)
            return UInt32(truncatingIfNeeded: handoff_xxh64_final(&xxh))
        }
        row("  checksum, XXH64", String(format: "%.1f", xxh64), String(format: "%.2f x memcpy", xxh64 / copy))
        // SHA-256 runs at a few hundred MB/s to 2 GB/s: a sixteenth of the bytes (at least a
        // chunk) tells as much. Each implementation this CPU runs.
        var sha = handoff_sha256()
        var digest = [UInt8](repeating: 0, count: 32)
        for implementation in 0...handoff_sha256_implementation() {
            let sha256 = rate(span: span, over: max(chunk, total / 16)) { offset in
                handoff_sha256_init_using(implementation, &sha)
                handoff_sha256_update(&sha, source0 + offset, chunk)
                handoff_sha256_final(&sha, &digest)
                return UInt32(digest[0])
            }
            let name = implementation == HANDOFF_SHA256_EXTENSIONS ? "SHA extensions" : "portable"
            row("  checksum, SHA-256 (\(name))", String(format: "%.2f", sha256), String(format: "%.3f x memcpy", sha256 / copy))
        }
    }
}
