import Foundation
import Handoff
import HandoffTestSupport
import Testing

/// How long the machine has held back this process's threads, in all, since the first wait that
/// asked: one ``StallProbe`` for the whole process, never stopped. A wait for something to happen
/// (an activity discovered, an event, a condition) allows this much on top of its timeout: in CI's
/// passes hundreds of tests share two CPUs, and a wait of 5 s meant for the code must not fail on
/// the queue. Bounds that are the rule under test (a deadline, a lease) are not waits of this kind
/// and keep their own measure.
///
/// A plain thread only, not also a task on the loops (`alsoOn:`): that task's `Task.sleep` wakes
/// through Swift's pool every 10 ms for the whole run, and the `.alone` test that holds every
/// thread of the pool (LoopSleepTests) saw a job it had queued start while it held them, in the
/// fresh-clone CI of 921a7b6.
let machineStalls = StallProbe.start()

/// A wait's end: `timeout` after it began, later by what ``machineStalls`` grew meanwhile (or a
/// probe of the caller's, when it grew more), but by at most three times `timeout`, so that a wait
/// for what never comes still ends.
struct WaitDeadline {
    let timeout: Duration
    private let began = ContinuousClock.now
    private let heldAtStart = machineStalls.heldSoFar
    private let probe: StallProbe?
    private let probeHeldAtStart: Duration

    /// `probe`: one started `alsoOn` the loops, for a wait on what a node does on its own timers:
    /// those wait for the loops, whose stalls ``machineStalls`` (a plain thread) does not see (the
    /// one-loop pass, whose one loop every test shares: a node there was held 2.6 s, past a 3-s
    /// wait's allowance, CI of b0c4e6c).
    init(_ timeout: Duration, allowingFor probe: StallProbe? = nil) {
        self.timeout = timeout
        self.probe = probe
        probeHeldAtStart = probe?.heldSoFar ?? .zero
    }

    /// The timeout and what the machine held back meanwhile (capped).
    var allowed: Duration {
        let held = max(machineStalls.heldSoFar - heldAtStart, probe.map { $0.heldSoFar - probeHeldAtStart } ?? .zero)
        return timeout + min(held, timeout * 3)
    }
    var waited: Duration { ContinuousClock.now - began }
    var passed: Bool { waited >= allowed }
    var remaining: Duration { max(.zero, allowed - waited) }
    /// For a failure's message: how long it waited, and how much of that was the machine's.
    var account: String { "waited \(waited) (timeout \(timeout), the machine held back \(allowed - timeout))" }
}

/// Polls `condition` until it holds or `timeout` passes (plus what the machine held back meanwhile,
/// or `probe` saw held back: ``WaitDeadline``).
func eventually(within timeout: Duration = .seconds(5), allowingFor probe: StallProbe? = nil, _ condition: () async -> Bool) async -> Bool {
    let deadline = WaitDeadline(timeout, allowingFor: probe)
    while !deadline.passed {
        if await condition() { return true }
        try? await Task.sleep(for: min(.milliseconds(20), deadline.remaining))
    }
    return await condition()
}

/// What `body` returns, or `nil` when it has not returned within `timeout` plus what the machine
/// held back meanwhile (it is then cancelled).
func within<Result: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async -> Result) async -> Result? {
    await withTaskGroup(of: Result?.self) { group in
        group.addTask { await body() }
        group.addTask {
            let deadline = WaitDeadline(timeout)
            while !deadline.passed, !Task.isCancelled { try? await Task.sleep(for: deadline.remaining) }
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

/// The first event in `events` that satisfies `predicate`, or `nil` after `timeout` (plus what
/// the machine held back meanwhile).
func firstEvent(
    in events: AsyncStream<ActivityEvent>,
    within timeout: Duration = .seconds(5),
    where predicate: @escaping @Sendable (ActivityEvent) -> Bool
) async -> ActivityEvent? {
    await within(timeout) {
        for await event in events where predicate(event) { return event }
        return nil
    } ?? nil
}

/// Waits until `node` knows of the activity with `id`, and returns it.
func discovered(_ id: String, on node: Node, within timeout: Duration = .seconds(5)) async throws -> DiscoveredActivity {
    let deadline = WaitDeadline(timeout)
    let event = await firstEvent(in: await node.discover(), within: timeout) { $0.activity.id == id }
    return try #require(event?.activity, "activity \(id) was not discovered: \(deadline.account)")
}

/// Whether `node` is synchronized within `bound`, plus what `probe` (started before the node, on
/// the loops: `StallProbe.start(alsoOn: EventLoops.shared)`) says the machine held them back
/// meanwhile: in CI's one-loop pass a node shares its loop with every test running beside it.
func synchronized(_ node: Node, within bound: Duration, allowingFor probe: StallProbe) async -> Bool {
    if await node.untilSynchronized(timeout: bound) { return true }
    return await node.untilSynchronized(timeout: probe.heldSoFar)
}
