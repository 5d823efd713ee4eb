import Foundation

/// The nodes' wall clocks in a simulated run (``SimulationOptions/clockSkew``): each node's clock
/// reads the run's true time plus an offset of its own, drawn within ± the skew (hosts whose clocks
/// do not agree). A node's machines read its clock wherever production reads `Date()`: envelopes'
/// send times and the sequence a process starts from, the replay window, expiration dates. Drawn
/// apart from the rest of the run, so a seed's schedule is the same with and without skew; with
/// none, every clock reads true time.
///
/// A node's clock keeps its offset when its process starts again: a simulated node keeps its id
/// across restarts (as a node given ``Node/Configuration/id`` does), and such a node's clock must
/// not go back across a restart by more than its last run lasted (docs/operations.md, "Clocks").
struct SimulatedClocks {
    /// Each node's offset from true time, by index.
    let offsets: [Duration]

    init(nodes: Int, skew: Duration, seed: UInt64) {
        var random = SimulationRandom(seed: seed ^ 0xC10C_5E7E_D0FF_5E75)
        offsets = (0..<nodes).map { _ in skew > .zero ? random.duration((.zero - skew)...skew) : .zero }
    }
}

extension SimulatedWorld {
    /// What node `index`'s clock reads now (``SimulatedClocks``).
    func date(of index: Int) -> Date {
        date.addingTimeInterval(clocks.offsets[index].seconds)
    }
}
