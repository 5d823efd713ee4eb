import CHandoffPlugin
import Foundation
import HandoffWire
import Logging
import Synchronization
import SwiftProtobuf

// What the app delegate's Handoff methods are to an app, the plugin's callbacks are to a plugin:
// streams opened to its activity, will-save and was-continued (originating side), did-update
// (continuing side). The last three are ABI 1.1; a 1.0 plugin has none of them.

/// The originating side: the node asks the activity's delegate, the plugin's host context.
extension PluginHostContext: UserActivityDelegate {
    /// Hands continuation streams opened to a plugin's activity to the plugin.
    func userActivity(_ activity: UserActivity, didReceive streams: ContinuationStreams) async {
        guard plugin.handlesStreams else {
            await streams.cancel(reason: "plugin \(plugin.name) does not handle streams")
            return
        }
        do {
            try await runStreams(streams, activity: serialized(activity))
        } catch {
            // Most often the peer's doing (it cancelled, or went): one line a minute per kind, so
            // that a peer opening and cancelling pairs as fast as it can does not write a line each.
            let kind = (error as? HandoffError).map { "\($0.code)" } ?? "\(type(of: error))"
            guard let unlogged = streamFailureLog.withLock({ $0.admit(kind, now: .now) }) else { return }
            let since = unlogged == 0 ? "" : " (\(unlogged) more such since the last line; logged at most once a minute per kind)"
            runtime.logger.warning("plugin \(plugin.name) streams for \(activity.activityType): \(error)\(since)")
        }
    }

    /// will_save: the plugin refreshes an activity it marked with needs_save, through a sink; what
    /// it hands back replaces what it may change (``applySaved(_:to:)``). A failure is logged, and
    /// the activity goes as it is.
    func userActivityWillSave(_ activity: UserActivity) async {
        guard let willSave = plugin.descriptor.pointee.will_save else { return }
        let bytes = serialized(activity)
        let sink = ActivitySink()
        let result = await call(locked: true) { state, error in
            var table = sink.table
            return bytes.withUnsafeBufferPointer { willSave(state, $0.baseAddress, $0.count, &table, error) }
        }
        do {
            try result.get()
            guard let refreshed = sink.activity else { return }
            guard refreshed.activityID == activity.id || refreshed.activityID.isEmpty, refreshed.activityType == activity.activityType else {
                throw HandoffError(.invalidActivityType, "will_save handed back activity \(refreshed.activityID) (\(refreshed.activityType)) for \(activity.id) (\(activity.activityType))")
            }
            try applySaved(refreshed, to: activity)
        } catch {
            runtime.logger.warning("plugin \(plugin.name) will_save for \(activity.activityType): \(error); sending it as it was")
        }
    }

    /// was_continued: node `node` continued one of the plugin's activities.
    func userActivityWasContinued(_ activity: UserActivity, by node: NodeInfo) async {
        guard let wasContinued = plugin.descriptor.pointee.was_continued else { return }
        let bytes = serialized(activity)
        _ = await call(locked: true) { state, _ in
            bytes.withUnsafeBufferPointer { buffer in
                node.name.withCString { wasContinued(state, buffer.baseAddress, buffer.count, $0) }
            }
            return Int32(HANDOFF_OK.rawValue)
        }
    }

    /// did_update: the originator changed an activity this node continued with the plugin.
    func didUpdate(_ activity: ContinuedActivity) async {
        guard let didUpdate = plugin.descriptor.pointee.did_update else { return }
        let bytes = activity.wireBytes
        _ = await call(locked: true) { state, _ in
            bytes.withUnsafeBufferPointer { didUpdate(state, $0.baseAddress, $0.count) }
            return Int32(HANDOFF_OK.rawValue)
        }
    }

    /// activity_changed: an activity of the plugin's types appeared, changed or went on the bus.
    func activityChanged(_ event: ActivityEvent) async {
        guard let activityChanged = plugin.descriptor.pointee.activity_changed,
              let bytes: [UInt8] = try? event.activity.advertisedWire.serializedBytes() else { return }
        let change: handoff_activity_change = switch event {
        case .appeared: HANDOFF_ACTIVITY_APPEARED
        case .updated: HANDOFF_ACTIVITY_UPDATED
        case .removed: HANDOFF_ACTIVITY_REMOVED
        }
        _ = await call(locked: true) { state, _ in
            bytes.withUnsafeBufferPointer { activityChanged(state, $0.baseAddress, $0.count, Int32(change.rawValue)) }
            return Int32(HANDOFF_OK.rawValue)
        }
    }

    /// needs_save: marks one of the plugin's current activities.
    func markNeedsSave(_ id: String) -> Bool {
        guard let activity = activities.withLock({ $0[id] }) else { return false }
        activity.needsSave = true
        return true
    }

    /// The activity as the plugin sees it: a serialized handoff.v1.Activity, this node its origin.
    private func serialized(_ activity: UserActivity) -> [UInt8] {
        (try? activity.wire(origin: runtime.node.info.wire, defaultTeamID: plugin.teamID).serializedBytes()) ?? []
    }
}

/// The continuing side: the runtime is the node's delegate, and hands did-update to the plugin
/// that restored the activity (the one that declares its type).
extension PluginRuntime: HandoffDelegate {
    public func node(_ node: Node, didUpdate activity: ContinuedActivity) async {
        guard let context = hosts.withLock({ $0.first { $0.plugin.activityTypes.contains(activity.activityType) } }) else { return }
        await context.didUpdate(activity)
    }

    public func node(_ node: Node, didFailToContinueActivityWithType activityType: String, error: HandoffError) async {
        logger.info("could not continue \(activityType): \(error)")
    }
}

/// The sink will_save writes the refreshed activity to (ABI 1.1, handoff_activity_sink).
final class ActivitySink: @unchecked Sendable {
    // Invariant: `received` is only touched under `lock` (the plugin may call from its thread).
    private let lock = NSLock()
    private var received: WireActivity?
    private(set) var table = handoff_activity_sink()

    init() {
        table.context = Unmanaged.passUnretained(self).toOpaque()
        table.set = { context, bytes, length in
            let sink = Unmanaged<ActivitySink>.fromOpaque(context!).takeUnretainedValue()
            guard let bytes, let activity = try? WireActivity(serializedBytes: Array(UnsafeBufferPointer(start: bytes, count: length))) else {
                return Int32(HANDOFF_INVALID_ARGUMENT.rawValue)
            }
            sink.lock.withLock { sink.received = activity }
            return Int32(HANDOFF_OK.rawValue)
        }
    }

    /// What the plugin handed back, if anything.
    var activity: WireActivity? { lock.withLock { received } }
}

let hostNeedsSave: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> Int32 = { pointer, id in
    let host = hostContext(pointer)
    let marked = host.markNeedsSave(id.map { String(cString: $0) } ?? "")
    return Int32(marked ? HANDOFF_OK.rawValue : HANDOFF_NOT_FOUND.rawValue)
}

/// continue_activity (ABI 1.2): the plugin's command continues an activity of its types and waits
/// for its restore (and streams) to end. It runs on a plugin worker thread, never on Swift's
/// cooperative pool, so blocking it while the node continues is safe.
let hostContinueActivity: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UInt32, handoff_error_buffer) -> Int32 = { pointer, type, id, timeoutMs, error in
    let host = hostContext(pointer)
    let activityType = type.map { String(cString: $0) } ?? ""
    func fail(_ status: handoff_status, _ message: String) -> Int32 {
        write(message, to: error)
        return Int32(status.rawValue)
    }
    guard host.plugin.activityTypes.contains(activityType) else {
        return fail(HANDOFF_UNSUPPORTED, "\(activityType) is not one of \(host.plugin.name)'s activity types")
    }
    guard host.plugin.descriptor.pointee.flags & UInt32(HANDOFF_PLUGIN_THREAD_SAFE) != 0 else {
        return fail(HANDOFF_UNSUPPORTED, "continue_activity needs a thread-safe plugin (HANDOFF_PLUGIN_THREAD_SAFE): its restore runs while its command waits")
    }
    let activityID = id.map { String(cString: $0) }
    let node = host.runtime.node
    let outcome = waitFor { () async throws -> Void in
        guard let activity = await node.activity(id: activityID, orNewestOf: activityType, within: .milliseconds(Int(timeoutMs))) else {
            throw LookupFailure.notFound("no activity of type \(activityType) is known on the bus")
        }
        // By id, the activity may be any plugin's: this plugin continues only its own types.
        guard activity.activityType == activityType else {
            throw LookupFailure.otherType("activity \(activity.id) is of type \(activity.activityType), not \(activityType)")
        }
        _ = try await node.continueActivity(activity)
    }
    switch outcome {
    case .success: return Int32(HANDOFF_OK.rawValue)
    case .failure(LookupFailure.notFound(let message)): return fail(HANDOFF_NOT_FOUND, message)
    case .failure(LookupFailure.otherType(let message)): return fail(HANDOFF_UNSUPPORTED, message)
    case .failure(let failure as HandoffError): return fail(HANDOFF_FAILED, failure.message)
    case .failure(let failure): return fail(HANDOFF_FAILED, "\(failure)")
    }
}

/// Why continue_activity found nothing to continue (a continuation that fails, its originator
/// answering "not found" among the reasons, is `HANDOFF_FAILED` with the reason).
private enum LookupFailure: Error {
    case notFound(String)
    case otherType(String)
}

extension DiscoveredActivity {
    /// What the advertisement says, as a handoff.v1.Activity (no userInfo: only a continuation
    /// carries it), for activity_changed.
    var advertisedWire: WireActivity {
        var wire = WireActivity()
        wire.activityID = id
        wire.activityType = activityType
        wire.title = title
        wire.origin = origin.wire
        wire.version = version
        if let expirationDate { wire.expiration = WireTimestamp(expirationDate) }
        if let updatedAt { wire.updatedAt = WireTimestamp(updatedAt) }
        wire.keywords = keywords
        wire.webpageURL = webpageURL?.absoluteString ?? ""
        wire.teamID = teamID ?? ""
        wire.eligibleForHandoff = true
        wire.supportsContinuationStreams = supportsContinuationStreams
        return wire
    }
}
