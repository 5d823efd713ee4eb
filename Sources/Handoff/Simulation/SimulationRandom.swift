/// The simulator's only source of randomness: SplitMix64, so that one seed gives one run, on any
/// machine and toolchain (the standard library's generator is neither seedable nor stable).
struct SimulationRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// True with probability `p`.
    mutating func chance(_ p: Double) -> Bool {
        Double.random(in: 0..<1, using: &self) < p
    }

    /// A duration between `range`'s bounds, to the microsecond.
    mutating func duration(_ range: ClosedRange<Duration>) -> Duration {
        let low = range.lowerBound.microseconds, high = range.upperBound.microseconds
        return .microseconds(Int64.random(in: low...high, using: &self))
    }

    /// A snapshot token, as ``Topic/newSnapshotToken()`` makes from the system's generator.
    mutating func token() -> String {
        Topic.newSnapshotToken(using: &self)
    }
}
