import Foundation

// What an activity must be to be advertised or sent (``UserActivity/validate(maxUserInfoSize:now:)``).
extension UserActivity {
    /// Whether the activity's expiration date passed by `now`.
    func expiryProblem(in state: State, now: Date) -> HandoffError? {
        guard let expiration = state.expirationDate, expiration <= now else { return nil }
        return HandoffError(.activityExpired, "the activity expired at \(expiration.formatted(.iso8601))", activityType: activityType)
    }

    /// Why `state` cannot be sent, its expiry apart (``expiryProblem(in:now:)``), or `nil`: what
    /// only a change of the state changes.
    func problem(in state: State, maxUserInfoSize: Int) -> HandoffError? {
        if !state.requiredUserInfoKeys.allSatisfy({ state.userInfo[$0] != nil }) {
            let missing = state.requiredUserInfoKeys.subtracting(state.userInfo.keys).sorted()
            return HandoffError(.missingRequiredUserInfoKey, "userInfo has no value for required key\(missing.count == 1 ? "" : "s") \(missing.map { "\"\($0)\"" }.joined(separator: ", "))", activityType: activityType)
        }
        let size = encodedSize(ofUserInfo: state.userInfo)
        if size > maxUserInfoSize {
            return HandoffError(.userInfoTooLarge, "userInfo encodes to \(size) bytes, over the \(maxUserInfoSize)-byte limit; send bulk data over a continuation stream instead", activityType: activityType)
        }
        if let url = state.webpageURL, !Self.isWebScheme(url.scheme) {
            return HandoffError(.handoffFailed, "webpageURL must be http or https, not \(url.absoluteString)", activityType: activityType)
        }
        let advertised = advertisedText(in: state)
        if advertised > WireLimits.maxAdvertisedText {
            return HandoffError(.messageTooLarge, "the advertisement would carry \(advertised) bytes of type, title, keywords and webpage URL, over the contract's \(WireLimits.maxAdvertisedText); put large content in userInfo or a continuation stream",
                                activityType: activityType, details: ["limit": "\(WireLimits.maxAdvertisedText)"])
        }
        return nil
    }

    /// The bytes of type, title, keywords and webpage URL its advertisement carries (wire.proto,
    /// "Limits": at most ``WireLimits/maxAdvertisedText``).
    func advertisedText(in state: State) -> Int {
        activityType.utf8.count + state.title.utf8.count
            + state.keywords.reduce(0) { $0 + $1.utf8.count } + (state.webpageURL?.absoluteString.utf8.count ?? 0)
    }

    /// http or https, in any case (a switch: an array literal of the two was built on every check).
    static func isWebScheme(_ scheme: String?) -> Bool {
        switch scheme?.lowercased() {
        case "http"?, "https"?: true
        default: false
        }
    }
}
