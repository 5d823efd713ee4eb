import Foundation

/// The fuzz budget: inputs per target, and the seed. `scripts/test` runs the default; set
/// `HANDOFF_FUZZ_INPUTS` (and `HANDOFF_FUZZ_SEED`) to run longer by hand.
enum FuzzBudget {
    static var inputs: Int { ProcessInfo.processInfo.environment["HANDOFF_FUZZ_INPUTS"].flatMap(Int.init) ?? 20_000 }
    static var seed: UInt64 { ProcessInfo.processInfo.environment["HANDOFF_FUZZ_SEED"].flatMap(UInt64.init) ?? 20_261_123 }
}

