/// How many of something each CURVE key holds, for a quota per key: a member may run many nodes
/// (an agent, and `handoff advertise` beside it) under one key, and may name itself as many node
/// ids as it likes, so a quota per node alone does not bound what one member holds. An empty key
/// (a bus without CURVE) is not counted: there, nothing proves who anyone is.
struct KeyCounts {
    private(set) var counts: [[UInt8]: Int] = [:]

    /// How many `key` holds (0 for an empty key).
    subscript(key: [UInt8]) -> Int { key.isEmpty ? 0 : counts[key] ?? 0 }

    mutating func add(_ key: [UInt8]) {
        guard !key.isEmpty else { return }
        counts[key, default: 0] += 1
    }

    mutating func remove(_ key: [UInt8]) {
        guard !key.isEmpty, let held = counts[key] else { return }
        counts[key] = held > 1 ? held - 1 : nil
    }
}
