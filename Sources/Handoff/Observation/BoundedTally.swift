/// Counts by name, for a tool that watches the bus: at most `capacity` names, and what comes
/// under a name past them is counted under ``overflowName``. The names come from the bus (activity
/// types), and a member publishing as many types as it likes must not grow an operator's monitor
/// without bound.
public struct BoundedTally<Counts: Sendable>: Sendable {
    /// Where counts of names past the capacity go.
    public static var overflowName: String { "(other types)" }

    public let capacity: Int
    private let zero: Counts
    public private(set) var counts: [String: Counts] = [:]

    /// - Parameters:
    ///   - capacity: The most names kept apart (at least 1).
    ///   - zero: A name's counts before anything is added.
    public init(capacity: Int = 10_000, zero: Counts) {
        self.capacity = max(1, capacity)
        self.zero = zero
    }

    /// Changes the counts of `name` (or of ``overflowName`` once `capacity` - 1 names are kept: the
    /// overflow's row is one of the `capacity`).
    ///
    /// - Returns: The name they were counted under.
    @discardableResult
    public mutating func add(_ name: String, _ change: (inout Counts) -> Void) -> String {
        let key = counts[name] != nil || counts.count < capacity - 1 ? name : Self.overflowName
        let zero = self.zero
        change(&counts[key, default: zero])
        return key
    }

    /// The counts of `name`, if it is kept.
    public subscript(name: String) -> Counts? { counts[name] }

    /// Forgets every name (a new window of rates).
    public mutating func removeAll() { counts.removeAll(keepingCapacity: true) }
}
