/// What an operator hears of snapshots that arrived short: at once for the first, then at most
/// once a minute, with how many came short since and what became of them, not a line per prefix
/// and attempt (a node asking all 1,500 of its snapshots at once logged 973 such lines in a run).
///
/// Pure state, time passed in: the follower logs the lines it returns.
struct ShortSnapshotReport {
    static let interval = Duration.seconds(60)
    /// Short answers not yet said: those asked again, and those gone on with after the last attempt.
    private(set) var askedAgain = 0
    private(set) var givenUp = 0
    private var lastPrefix = ""
    private var lastLine: ContinuousClock.Instant?

    /// The snapshot of `typePrefix` arrived short: asked again after its backoff, or (`gaveUp`)
    /// short after its last attempt. Returns the line to log now, if one is due.
    mutating func note(_ typePrefix: String, gaveUp: Bool, now: ContinuousClock.Instant) -> String? {
        if gaveUp { givenUp += 1 } else { askedAgain += 1 }
        lastPrefix = typePrefix
        return due(now: now)
    }

    /// The line for what was not said yet, once a minute has passed since the last (each tick).
    mutating func due(now: ContinuousClock.Instant) -> String? {
        guard askedAgain + givenUp > 0, lastLine.map({ now - $0 >= Self.interval }) ?? true else { return nil }
        defer { (askedAgain, givenUp, lastLine) = (0, 0, now) }
        var what: [String] = []
        if askedAgain > 0 { what.append("\(askedAgain) asked again after a backoff (\(SnapshotRequests.firstRetryDelay), doubling, \(SnapshotRequests.maxAttempts) attempts in all)") }
        if givenUp > 0 { what.append("\(givenUp) still short after the last attempt (the refresh of each activity fills the rest)") }
        let since = lastLine.map { " in the last \(now - $0)" } ?? ""
        let last = lastPrefix.isEmpty ? "every type" : "\"\(lastPrefix)\""
        return "snapshots arrived short\(since), the last for \(last): \(what.joined(separator: "; ")). A queue overflowed on the way, or an answerer busy with others replied with its count alone (said at most once a minute)"
    }
}
