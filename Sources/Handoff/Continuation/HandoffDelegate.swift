import Foundation

/// Told about continuations on the continuing side, like an app delegate's Handoff methods.
public protocol HandoffDelegate: AnyObject, Sendable {
    /// A continuation of an activity of this type is about to start; return `false` to decline it.
    func node(_ node: Node, willContinueActivityWithType activityType: String) async -> Bool

    /// A continuation failed; `error` says why.
    func node(_ node: Node, didFailToContinueActivityWithType activityType: String, error: HandoffError) async

    /// An activity this node continued was updated by its originator; `activity` is the new state.
    func node(_ node: Node, didUpdate activity: ContinuedActivity) async
}

extension HandoffDelegate {
    public func node(_ node: Node, willContinueActivityWithType activityType: String) async -> Bool { true }
    public func node(_ node: Node, didFailToContinueActivityWithType activityType: String, error: HandoffError) async {}
    public func node(_ node: Node, didUpdate activity: ContinuedActivity) async {}
}

/// Restores a continued activity: the continue/restore handler registered for an activity type.
public typealias ContinuationHandler = @Sendable (ContinuedActivity) async throws -> Void
