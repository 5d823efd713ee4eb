import Foundation
import HandoffWire
import Synchronization

/// Whether an activity may be continued by many nodes or only once.
public enum ContinuationPolicy: Sendable, Hashable {
    /// Any number of nodes may continue the activity, each getting the current state (Apple's behaviour,
    /// and the default).
    case many
    /// The first successful continuation invalidates the activity: it is withdrawn from the bus, and
    /// later requests fail with ``HandoffError/Code-swift.struct/alreadyContinued``.
    case once
}

/// What a user is doing, in a form another process can pick up — Handoff's `NSUserActivity`.
///
/// Make one, describe the state, and make it current on a ``Node``: the node advertises it on the
/// bus until it resigns or is invalidated. Another node that discovers it can continue it; the
/// activity's ``delegate`` is asked to refresh state first when ``needsSave`` is set.
///
/// ```swift
/// let activity = try UserActivity(activityType: "org.handoff.contacts.edit-contact")
/// activity.title = "Editing Ada Lovelace"
/// activity.addUserInfoEntries(from: ["firstName": "Ada", "lastName": "Lovelace"])
/// activity.requiredUserInfoKeys = ["firstName"]
/// try await activity.becomeCurrent(on: node)
/// ```
///
/// Every property may be read and set from any thread or task. Setting one on a current activity
/// bumps its ``version`` and re-advertises it, so continuing nodes hear of the update.
public final class UserActivity: Sendable, Identifiable, CustomStringConvertible {
    /// The activity's reverse-DNS type, e.g. `org.handoff.contacts.edit-contact`.
    public let activityType: String
    /// A unique id, fixed for the activity's life (a UUID).
    public let id: String

    struct State {
        var title = ""
        var userInfo: [String: UserInfoValue] = [:]
        var requiredUserInfoKeys: Set<String> = []
        var needsSave = false
        var webpageURL: URL?
        var expirationDate: Date?
        var keywords: Set<String> = []
        var supportsContinuationStreams = false
        var isEligibleForHandoff = true
        var continuationPolicy = ContinuationPolicy.many
        var teamID: String?
        var document: DocumentReference?
        weak var delegate: (any UserActivityDelegate)?
        var version: UInt64 = 1
        /// Set when it becomes current and at each change while current: only a current activity's
        /// is ever sent (so a new activity reads no clock for it).
        var updatedAt = Date.distantPast
        var node: Node?
        var isInvalidated = false
        var continuedOnce = false
        /// The full activity encoded for a continue reply, while it holds (UserActivity+EncodedWire.swift).
        var encodedWire: EncodedWire?
        /// The version and size limit whose checks but expiry passed last (they read only what `mutate` changes).
        var validated: (version: UInt64, maxUserInfoSize: Int)?
    }

    private let state: Mutex<State>

    /// Creates an activity of a type.
    ///
    /// - Parameter activityType: A reverse-DNS name: at least two dot-separated labels of letters,
    ///   digits, `-` and `_`, at most 255 characters (e.g. `org.handoff.contacts.edit-contact`).
    /// - Throws: ``HandoffError`` with ``HandoffError/Code-swift.struct/invalidActivityType``.
    public init(activityType: String) throws(HandoffError) {
        try Self.validate(activityType: activityType)
        self.activityType = activityType
        id = ActivityIDs.make()
        state = Mutex(State())
    }

    /// An activity with a given id (the simulator's, which must be the same in every run of a seed).
    init(activityType: String, id: String) throws(HandoffError) {
        try Self.validate(activityType: activityType)
        self.activityType = activityType
        self.id = id
        // The simulator advertises it without making it current on a node: stamped here instead.
        var state = State()
        state.updatedAt = Date()
        self.state = Mutex(state)
    }

    /// Checks that `activityType` is a reverse-DNS name.
    ///
    /// - Throws: ``HandoffError`` with ``HandoffError/Code-swift.struct/invalidActivityType`` saying what is wrong.
    public static func validate(activityType: String) throws(HandoffError) {
        func fail(_ why: String) -> HandoffError {
            HandoffError(.invalidActivityType, "\"\(activityType)\" is not a reverse-DNS activity type: \(why) (e.g. org.example.app.edit-document)", activityType: activityType)
        }
        guard !activityType.isEmpty else { throw fail("it is empty") }
        guard activityType.utf8.count <= WireLimits.maxActivityType else { throw fail("it is longer than \(WireLimits.maxActivityType) bytes") }
        // One pass over the bytes, no labels split out: this runs for every activity made. The
        // error paths, rare, find the offending label again.
        var labels = 1, labelLength = 0, allowed = true
        for byte in activityType.utf8 {
            switch byte {
            case UInt8(ascii: "."):
                guard labelLength > 0 else { throw fail("it has an empty label") }
                labels += 1
                labelLength = 0
            default:
                labelLength += 1
                allowed = allowed && isLabelByte(byte)
            }
        }
        guard labels >= 2 else { throw fail("it needs at least two dot-separated labels") }
        guard labelLength > 0 else { throw fail("it has an empty label") }
        guard allowed else {
            let label = activityType.split(separator: ".").first { !$0.utf8.allSatisfy(isLabelByte) } ?? ""
            throw fail("label \"\(label)\" may hold only ASCII letters, digits, '-' and '_'")
        }
    }

    /// A letter, digit, `-` or `_`: what a label of an activity type may hold.
    private static func isLabelByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"): true
        default: false
        }
    }

    // MARK: Properties

    /// A short, user-visible description of what the user is doing.
    public var title: String {
        get { state.withLock { $0.title } }
        set { mutate { $0.title = newValue } }
    }

    /// The state another node needs to pick up where the user left off. Keep it small: the encoded
    /// size is limited (3 KB by default, ``Node/Configuration-swift.struct/maxUserInfoSize``); bulk data
    /// belongs in a continuation stream.
    public var userInfo: [String: UserInfoValue] {
        get { state.withLock { $0.userInfo } }
        set { mutate { $0.userInfo = newValue } }
    }

    /// Adds entries to ``userInfo``, replacing values of keys already there.
    public func addUserInfoEntries(from entries: [String: UserInfoValue]) {
        mutate { $0.userInfo.merge(entries) { _, new in new } }
    }

    /// Keys that must have a value in ``userInfo`` for the activity to be advertised or continued.
    public var requiredUserInfoKeys: Set<String> {
        get { state.withLock { $0.requiredUserInfoKeys } }
        set { mutate { $0.requiredUserInfoKeys = newValue } }
    }

    /// Set when the activity's state changed and ``userInfo`` should be refreshed: the delegate's
    /// ``UserActivityDelegate/userActivityWillSave(_:)`` runs right before the state is next sent.
    public var needsSave: Bool {
        get { state.withLock { $0.needsSave } }
        set { mutate { $0.needsSave = newValue } }
    }

    /// Where a node with no handler for the type can continue in a browser (http or https).
    public var webpageURL: URL? {
        get { state.withLock { $0.webpageURL } }
        set { mutate { $0.webpageURL = newValue } }
    }

    /// When the activity stops being offered; `nil` for never.
    public var expirationDate: Date? {
        get { state.withLock { $0.expirationDate } }
        set { mutate { $0.expirationDate = newValue } }
    }

    /// Words that describe the activity, for search.
    public var keywords: Set<String> {
        get { state.withLock { $0.keywords } }
        set { mutate { $0.keywords = newValue } }
    }

    /// The document the activity is about (the third way to pass data, as `UIDocument` hands off
    /// its URL): a continuing node opens it with ``Node/openDocument(of:into:)``. Make it with
    /// ``DocumentReference/file(at:version:)``, and set it again when the document changes.
    public var document: DocumentReference? {
        get { state.withLock { $0.document } }
        set { mutate { $0.document = newValue } }
    }

    /// Whether a continuing node may open continuation streams to this activity's originator.
    public var supportsContinuationStreams: Bool {
        get { state.withLock { $0.supportsContinuationStreams } }
        set { mutate { $0.supportsContinuationStreams = newValue } }
    }

    /// Whether the activity is offered to other nodes when current (default `true`).
    public var isEligibleForHandoff: Bool {
        get { state.withLock { $0.isEligibleForHandoff } }
        set { mutate { $0.isEligibleForHandoff = newValue } }
    }

    /// Whether the activity may be continued many times (default) or once.
    public var continuationPolicy: ContinuationPolicy {
        get { state.withLock { $0.continuationPolicy } }
        set { mutate { $0.continuationPolicy = newValue } }
    }

    /// The team the activity belongs to; `nil` uses the node's ``Node/Configuration-swift.struct/teamID``.
    public var teamID: String? {
        get { state.withLock { $0.teamID } }
        set { mutate { $0.teamID = newValue } }
    }

    /// Told when the activity is about to be sent and when it was continued. Held weakly.
    public var delegate: (any UserActivityDelegate)? {
        get { state.withLock { $0.delegate } }
        set { state.withLock { $0.delegate = newValue } }
    }

    /// Counts changes: 1 at creation, one more for every change to a property. Continuing nodes use it
    /// to tell an update from a repeat.
    public var version: UInt64 { state.withLock { $0.version } }

    /// Whether the activity is current on a node.
    public var isCurrent: Bool { state.withLock { $0.node != nil } }

    /// Whether ``invalidate()`` has run.
    public var isInvalidated: Bool { state.withLock { $0.isInvalidated } }

    public var description: String {
        state.withLock { "UserActivity(\(activityType), \"\($0.title)\", id \(id), v\($0.version))" }
    }

    /// Applies a change, bumps the version, and tells the node (if current) to re-advertise.
    private func mutate(_ change: (inout State) -> Void) {
        let node: Node? = state.withLock { state in
            change(&state)
            state.version += 1
            // Not current: becoming current stamps it (an activity set up before it becomes current
            // reads the clock once, not once per property).
            if state.node != nil { state.updatedAt = Date() }
            return state.node
        }
        node?.activityDidChange(id)
    }

    // MARK: Lifecycle

    /// Makes the activity current on `node`: it is advertised on the bus (when eligible for handoff)
    /// and may be continued. Making it current again, or on another node, moves it.
    ///
    /// - Throws: ``HandoffError``: ``HandoffError/Code-swift.struct/userInfoTooLarge`` when the encoded
    ///   ``userInfo`` is over the node's limit; ``HandoffError/Code-swift.struct/missingRequiredUserInfoKey``;
    ///   ``HandoffError/Code-swift.struct/invalidatedLocally`` after ``invalidate()``;
    ///   ``HandoffError/Code-swift.struct/activityExpired`` when the expiration date has passed;
    ///   ``HandoffError/Code-swift.struct/handoffFailed`` for a webpage URL that is not http(s);
    ///   ``HandoffError/Code-swift.struct/messageTooLarge`` when its type, title, keywords and webpage
    ///   URL exceed ``WireLimits/maxAdvertisedText``.
    nonisolated(nonsending)
    public func becomeCurrent(on node: Node) async throws(HandoffError) {
        let previous = try claim(for: node)
        if let previous, previous !== node { await previous.remove(self, reason: .resigned) }
        try await node.add(self)
    }

    /// Checks that the activity may become current on `node` and makes it the activity's node;
    /// returns the node it was current on before, if any.
    func claim(for node: Node) throws(HandoffError) -> Node? {
        let now = Date()
        try validate(maxUserInfoSize: node.configuration.maxUserInfoSize, now: now)
        return try state.withLock { (state) throws(HandoffError) -> Node? in
            guard !state.isInvalidated else {
                throw HandoffError(.invalidatedLocally, "an invalidated activity cannot become current again; make a new one", activityType: activityType)
            }
            defer {
                state.node = node
                // Made current now: the newest of its type on other nodes (DiscoveredActivity.updatedAt).
                state.updatedAt = now
            }
            return state.node
        }
    }

    /// Stops advertising the activity. It can become current again later.
    nonisolated(nonsending)
    public func resignCurrent() async {
        let node: Node? = state.withLock { state in
            defer { state.node = nil }
            return state.node
        }
        await node?.remove(self, reason: .resigned)
    }

    /// Ends the activity for good: it is withdrawn from the bus, and continue requests for it fail with
    /// ``HandoffError/Code-swift.struct/activityInvalidated``.
    nonisolated(nonsending)
    public func invalidate() async {
        let node: Node? = state.withLock { state in
            state.isInvalidated = true
            defer { state.node = nil }
            return state.node
        }
        await node?.remove(self, reason: .invalidated)
    }

    /// Checks everything that must hold before the activity is advertised or sent.
    // MARK: What its node tells it

    /// Its node let it go (the node stopped, or the activity expired there): no longer current.
    func detach() {
        state.withLock { $0.node = nil }
    }

    /// A continue-once activity was continued: it is invalidated and no longer current.
    func invalidateAfterContinuation() {
        state.withLock {
            $0.isInvalidated = true
            $0.node = nil
        }
    }

    /// Claims the one continuation a continue-once activity allows; `false` when it was claimed
    /// already. Claimed before anything awaits, so two requests arriving together cannot both have it.
    func claimContinuation() -> Bool {
        state.withLock { state in
            defer { state.continuedOnce = true }
            return !state.continuedOnce
        }
    }

    /// Gives a claim back: the continuation it was for failed.
    func releaseContinuationClaim() {
        state.withLock { $0.continuedOnce = false }
    }

    /// Will-save ran: the state is up to date. No version bump: the save itself is not a change
    /// to advertise.
    func didSave() {
        state.withLock { $0.needsSave = false }
    }

    func validate(maxUserInfoSize: Int, now: Date = Date()) throws(HandoffError) {
        // Checked under the lock, on the state in place: a copy of it (a reference count for each
        // string, set and map) was most of what checking cost on every advertisement.
        let found = state.withLock { state -> HandoffError? in
            if let expired = expiryProblem(in: state, now: now) { return expired }
            if let validated = state.validated, validated == (state.version, maxUserInfoSize) { return nil }
            if let problem = problem(in: state, maxUserInfoSize: maxUserInfoSize) { return problem }
            state.validated = (state.version, maxUserInfoSize)
            return nil
        }
        if let found { throw found }
    }

    /// The full activity as sent to a continuing node.
    func wire(origin: WireNodeRef, defaultTeamID: String?) -> WireActivity {
        state.withLock { wire(of: $0, origin: origin, defaultTeamID: defaultTeamID) }
    }

    /// The same, encoded, and its version: made once for as long as the activity does not change.
    func encodedWire(origin: WireNodeRef, defaultTeamID: String?) -> (bytes: [UInt8], version: UInt64) {
        state.withLock { state in
            if let encoded = state.encodedWire, encoded.holds(for: state, origin: origin, defaultTeamID: defaultTeamID) {
                return (encoded.bytes, encoded.version)
            }
            let encoded = EncodedWire(
                wire(of: state, origin: origin, defaultTeamID: defaultTeamID), updatedAt: state.updatedAt, defaultTeamID: defaultTeamID)
            state.encodedWire = encoded
            return (encoded.bytes, encoded.version)
        }
    }

    /// The small advertisement of the activity for the bus.
    /// Whether it is advertised while current: eligible for Handoff, and within the contract's text
    /// limit (one changed past it is withdrawn, and left out of presences and snapshots, until it
    /// fits again: ``Advertiser``).
    var isAdvertisable: Bool {
        state.withLock { $0.isEligibleForHandoff && advertisedText(in: $0) <= WireLimits.maxAdvertisedText }
    }

    func advertisement(origin: WireNodeRef, continueEndpoint: String, lease: Duration, defaultTeamID: String?) -> WirePlainAdvertisement {
        state.withLock { state in
            var advertisement = WirePlainAdvertisement()
            advertisement.activityID = id
            advertisement.activityType = activityType
            advertisement.title = state.title
            advertisement.origin = origin
            advertisement.continueEndpoint = continueEndpoint
            advertisement.version = state.version
            if let expiration = state.expirationDate { advertisement.expiresAt = WireTimestamp(expiration) }
            advertisement.leaseMs = UInt32(clamping: lease.milliseconds)
            advertisement.supportsContinuationStreams = state.supportsContinuationStreams
            advertisement.teamID = state.teamID ?? defaultTeamID ?? ""
            advertisement.webpageURL = state.webpageURL?.absoluteString ?? ""
            advertisement.keywords = state.keywords.sorted()
            advertisement.updatedAt = WireTimestamp(state.updatedAt)
            return advertisement
        }
    }
}
