import Foundation
import Testing
@testable import Handoff

/// Hosts whose clocks disagree (`handoff-sim --clock-skew`, ``SimulatedClocks``): each node's
/// machines read a clock of their own, off true time, wherever production reads `Date()` (send
/// times, the sequence a process starts from, the replay window, expiration dates).
extension SimulatorTests {
    @Test("with each node's clock up to 2 s off true time (two clocks up to 4 s apart, within the replay window less the refresh interval), fresh seeds pass every invariant node to node, through a broker and at four sites")
    func clockSkewFreshSeeds() async throws {
        try await passesFreshSeeds(10, "--clock-skew", "2")
        try await passesFreshSeeds(10, "--broker", "--clock-skew", "2")
        try await passesFreshSeeds(6, "--sites", "4", "--clock-skew", "2")
    }

    /// Seed 9088 through a broker, with clocks up to 12 s off (2026-12-07, when skew was first
    /// simulated): node-2's clock is 21 s ahead of node-3's, so the broker's copy of what node-3
    /// last sent, up to a refresh interval (25 s) old by node-3's clock, is past node-2's 30-s
    /// replay window by node-2's, and node-2 refuses it as stale until node-3 sends again.
    @Test("clocks further apart than the replay window less the refresh interval hide activities, and the invariants say so: seed 9088 through a broker, clocks up to 12 s off, fails live-activity-known; up to 2 s off, it passes")
    func clockSkewBeyondItsBoundFails() {
        var options = SimulationOptions()
        options.broker = true
        options.clockSkew = .seconds(12)
        let far = Simulation.run(seed: 9088, options: options)
        #expect(far.failure?.invariant == "live-activity-known", "\(String(describing: far.failure))")
        options.clockSkew = .seconds(2)
        let near = Simulation.run(seed: 9088, options: options)
        #expect(near.failure == nil, "\(String(describing: near.failure))")
        #expect(near.entries == far.entries, "the seed's schedule does not depend on the clocks")
    }

    @Test("each node reads its own clock: offsets within the skew, the same for a seed every run, drawn apart from the schedule; without skew every clock reads true time")
    func clockSkewNodeClocks() throws {
        var options = SimulationOptions()
        options.clockSkew = .seconds(2)
        let world = SimulatedWorld(options: options, seed: 41, hostile: [], trace: nil)
        let offsets = world.clocks.offsets
        #expect(offsets.count == options.nodes)
        #expect(offsets.allSatisfy { $0 >= .seconds(-2) && $0 <= .seconds(2) }, "\(offsets)")
        #expect(Set(offsets).count == offsets.count, "every node's clock is off by its own amount: \(offsets)")
        #expect(SimulatedWorld(options: options, seed: 41, hostile: [], trace: nil).clocks.offsets == offsets)
        for index in offsets.indices {
            #expect(abs(world.date(of: index).timeIntervalSince(world.date) - offsets[index].seconds) < 1e-6)
        }
        let trueClocks = SimulatedWorld(options: SimulationOptions(), seed: 41, hostile: [], trace: nil)
        #expect(trueClocks.clocks.offsets.allSatisfy { $0 == .zero })
        #expect(trueClocks.date(of: 0) == trueClocks.date)
    }
}
