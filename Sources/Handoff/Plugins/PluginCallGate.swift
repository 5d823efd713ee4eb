/// Which of a plugin's calls are running, and whether its shutdown has closed it to new ones.
///
/// `shutdown` frees the plugin's state, so the ABI promises it is the last call. The plugin's lock
/// cannot keep that promise alone: stream handlers run unlocked for whole transfers, and a locked
/// call may still be waiting for a worker or for the lock when shutdown takes it. So every call
/// enters here on its worker, just before it reaches the plugin; shutdown closes the gate, waits
/// for the calls inside to leave, and only then calls the plugin. A call that reaches the gate
/// after it closed never reaches the plugin.
struct PluginCallGate: Sendable {
    /// Calls inside the plugin now.
    private(set) var running = 0
    /// Shutdown has begun: no call enters any more.
    private(set) var closed = false

    /// A call about to reach the plugin: false once the gate closed (the call must not be made).
    mutating func enter() -> Bool {
        guard !closed else { return false }
        running += 1
        return true
    }

    /// A call that entered returned from the plugin.
    mutating func leave() {
        precondition(running > 0, "a plugin call left the gate it never entered")
        running -= 1
    }

    /// Closes the gate for good.
    ///
    /// - Returns: Whether this call closed it (false when it was closed already).
    mutating func close() -> Bool {
        defer { closed = true }
        return !closed
    }
}
