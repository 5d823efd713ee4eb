import Testing

/// The simulator's regressions in discovery: seeds that found a rule of the follower's machines
/// wrong, replayed with their traces.
extension SimulatorTests {
    /// Regression (2026-12-05, found by the fresh-clone CI's seeds): node-2 started again while
    /// node-1 was stopped (SIGSTOP), and asked its snapshots; once node-1 went on, its presence
    /// named five activities node-2 lacked, and the round of snapshots it started reused those
    /// still under way, asked while node-1 was stopped. They ended on their grace without node-1's
    /// answer, so the round counted node-1's ids as not followed here and held node-1 back: node-2
    /// never knew them. A round now asks for a snapshot of its own once one asked before its news ends.
    @Test("regression, seed 335836501 (slices of two): a round of resynchronization is not settled by snapshots asked before its news")
    func roundAsksSnapshotsOfItsOwn() async throws {
        let run = try await runSimulator(["--seed", "335836501", "--slice", "2", "--trace"])
        #expect(run.status == 0, "\(run.output.suffix(3_000))")
        #expect(run.output.contains("[   32.110] node-2: a presence of node-1 names 3 activities not known here; asking for the snapshots again"),
                "the seed no longer starts the round while node-2's snapshots from its restart are under way")
        #expect(run.output.contains("[   32.219] node-2: appeared: \"a6-n1 changed at 7.107978 seconds\""), "the round's own snapshot no longer brings a6-n1")
    }
}
