import Testing

/// The simulator's stream peers that misbehave: an originator that lies about what it writes, and
/// applications that get stuck half way, each caught with a typed error in a seed's run.
extension SimulatorTests {
    @Test("a hostile originator lies about its stream four ways (a changed chunk, a wrong checksum, a byte fewer, a byte more at the end): each reader catches it with a typed error, never a whole stream")
    func streamLiesCaught() async throws {
        let expected = [
            "22": "(it changes a byte of a chunk): stream checksum mismatch",
            "13": "(it sends a wrong checksum at the end): stream checksum mismatch",
            "1": "(it claims a byte fewer at the end): stream truncated",
            "15": "(it claims a byte more at the end): stream truncated",
        ]
        for (seed, caught) in expected {
            let run = try await runSimulator(["--seed", seed, "--trace"])
            #expect(run.status == 0, "seed \(seed): \(run.output.suffix(3_000))")
            #expect(run.output.contains("caught the originator's lie \(caught)"), "seed \(seed)")
            #expect(run.output.contains("1 lies caught"), "seed \(seed)")
        }
    }

    @Test("a stream whose originator's application gets stuck half way is given up on by the stall timeout, on both sides, with a typed error (seed 5)")
    func stuckWriterGivenUpOn() async throws {
        let run = try await runSimulator(["--seed", "5", "--trace"])
        #expect(run.status == 0, "\(run.output.suffix(3_000))")
        let lines = run.output.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.contains("opens stream 0") && $0.contains("its writers stop half way") }, "seed 5 no longer draws a stuck writer for stream 0")
        #expect(lines.contains { $0.contains("stream 0 failed (continuing side): remote application timed out") && $0.contains("sent nothing new") })
        #expect(lines.contains { $0.contains("stream 0 failed (originating side): remote application timed out") && $0.contains("the other side gave up") })
        #expect(run.output.contains("1 stuck given up on"), "\(run.output.suffix(500))")
    }
}
