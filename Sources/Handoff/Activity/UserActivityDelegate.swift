/// Told about an activity's life on its originating node.
public protocol UserActivityDelegate: AnyObject, Sendable {
    /// The activity is about to be sent to a continuing node and ``UserActivity/needsSave`` is set:
    /// bring ``UserActivity/userInfo`` up to date now. ``UserActivity/needsSave`` is cleared afterwards.
    func userActivityWillSave(_ activity: UserActivity) async

    /// Another node continued the activity.
    func userActivityWasContinued(_ activity: UserActivity, by node: NodeInfo) async

    /// A continuing node opened continuation streams (``Node/openStreams(for:)``): write to
    /// `streams.output`, read `streams.input`. Runs in its own task; take as long as the transfer needs.
    func userActivity(_ activity: UserActivity, didReceive streams: ContinuationStreams) async
}

extension UserActivityDelegate {
    public func userActivityWillSave(_ activity: UserActivity) async {}
    public func userActivityWasContinued(_ activity: UserActivity, by node: NodeInfo) async {}
    /// Refuses the streams (cancels them) unless the delegate implements this.
    public func userActivity(_ activity: UserActivity, didReceive streams: ContinuationStreams) async {
        await streams.cancel(reason: "the originator does not handle continuation streams")
    }
}
