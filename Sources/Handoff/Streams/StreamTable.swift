import Foundation

/// What the stream table needs to know of a pair; ``StreamSession`` is one. A protocol so that the
/// table is tested without a node, sockets or tasks.
protocol StreamTableEntry: AnyObject {
    var key: StreamKey { get }
    /// Where its frames go; the table changes it when a resumed pair arrives on a new connection.
    var route: StreamRoute { get set }
    /// The peer, for the per-peer limit: its CURVE key, or its node id without security.
    var owner: String { get }
    /// Whether this node opened the pair (the continuing side).
    var isContinuer: Bool { get }
    /// The originator's token for a resume (empty until the open is answered).
    var resumeToken: Data { get }
    /// When the pair failed; `nil` while it still works (a completed pair leaves the table).
    var failedAt: ContinuousClock.Instant? { get }
    /// Whether it waits on its peer rather than on this side (``StreamPair/waitsOnPeer(writerWaiting:)``).
    var waitsOnPeer: Bool { get }
    /// Since when it is its peer's turn: its last progress, or this side's last step if later
    /// (``StreamPair/peersTurnSince``).
    var peersTurnSince: ContinuousClock.Instant { get }
}

extension StreamTableEntry {
    /// Whether the pair still works: not failed (a completed one has left the table).
    var isLive: Bool { failedAt == nil }
}

/// Whether the limits on open pairs let one more in (``StreamTable/admission(owner:maxStreams:maxStreamsPerPeer:)``).
enum StreamAdmission: Equatable {
    case admitted
    /// The node has `open` live pairs, its limit; the peer has `fromPeer` of them.
    case nodeFull(open: Int, fromPeer: Int)
    /// The peer has `fromPeer` live pairs, its limit.
    case peerFull(fromPeer: Int)
}

/// A node's stream pairs: by their key for their whole life, by their route for the frames that
/// arrive, the limits on how many are open, and the lookups a resume makes.
///
/// A failed pair stays until the node's supervision forgets it (its failure is reported first), but
/// it no longer counts against the limits and frames no longer reach it. Failed pairs are kept
/// only up to a number (``failedToMakeRoom(keeping:)``): a peer that opens and fails pairs as fast
/// as it can would otherwise fill the table for as long as a failed pair is kept.
struct StreamTable<Session: StreamTableEntry> {
    private var sessions: [StreamKey: Session] = [:]
    private var routes: [StreamRoute: StreamKey] = [:]
    private var lastKey: UInt64 = 0
    private var lastRouteID: UInt64 = 0

    /// Why an open is refused, if it is.
    typealias Admission = StreamAdmission

    /// A key no pair had before.
    mutating func newKey() -> StreamKey {
        lastKey += 1
        return StreamKey(local: lastKey)
    }

    /// A wire id for a pair this node opens (its DEALER's pairs are told apart by it).
    mutating func newRouteID() -> UInt64 {
        lastRouteID += 1
        return lastRouteID
    }

    mutating func insert(_ session: Session) {
        sessions[session.key] = session
        routes[session.route] = session.key
    }

    /// Forgets the pair; its route too, unless another pair took it since.
    mutating func remove(_ session: Session) {
        sessions[session.key] = nil
        if routes[session.route] == session.key { routes[session.route] = nil }
    }

    /// Forgets every pair, as a process that died would.
    mutating func removeAll() {
        sessions.removeAll()
        routes.removeAll()
    }

    subscript(key: StreamKey) -> Session? { sessions[key] }

    /// The live pair frames on `route` belong to.
    func live(on route: StreamRoute) -> Session? {
        guard let key = routes[route], let session = sessions[key], session.isLive else { return nil }
        return session
    }

    /// Whether some pair, live or failed, holds `route` (a repeated open is not a new pair).
    func isTaken(_ route: StreamRoute) -> Bool { routes[route] != nil }

    /// Moves a pair to the route it was resumed on.
    mutating func move(_ session: Session, to route: StreamRoute) {
        guard session.route != route else { return }
        if routes[session.route] == session.key { routes[session.route] = nil }
        session.route = route
        routes[route] = session.key
    }

    /// The failed pairs to forget before one more pair is inserted, so that at most `kept` failed
    /// pairs stay: the ones that failed first (they have had the longest to see their late frames).
    func failedToMakeRoom(keeping kept: Int) -> [Session] {
        let failed = sessions.values.filter { !$0.isLive }
        guard failed.count > kept else { return [] }
        func firstFailed(_ a: Session, _ b: Session) -> Bool { (a.failedAt!, a.key.local) < (b.failedAt!, b.key.local) }
        // One over, as a table at its bound is each time another pair is made: no sort for that.
        if failed.count == kept + 1 { return [failed.min(by: firstFailed)!] }
        return Array(failed.sorted(by: firstFailed).prefix(failed.count - kept))
    }

    /// Every pair, live or failed.
    var all: Dictionary<StreamKey, Session>.Values { sessions.values }
    var count: Int { sessions.count }

    /// The live pairs, oldest first.
    var live: [Session] { sessions.values.filter(\.isLive).sorted { $0.key.local < $1.key.local } }
    var liveCount: Int { sessions.values.count(where: \.isLive) }

    /// Whether one more pair with `owner` fits under the node's and the peer's limits.
    func admission(owner: String, maxStreams: Int, maxStreamsPerPeer: Int) -> Admission {
        var open = 0, fromPeer = 0
        for session in sessions.values where session.isLive {
            open += 1
            if session.owner == owner { fromPeer += 1 }
        }
        if open >= maxStreams { return .nodeFull(open: open, fromPeer: fromPeer) }
        if fromPeer >= maxStreamsPerPeer { return .peerFull(fromPeer: fromPeer) }
        return .admitted
    }

    /// The originator's pair a resume names: its wire id and token (it arrives on a new connection,
    /// so the route's peer differs).
    func resumable(id: UInt64, token: Data) -> Session? {
        sessions.values.first { !$0.isContinuer && $0.route.id == id && $0.isLive && !$0.resumeToken.isEmpty && $0.resumeToken == token }
    }

    /// The originator's pair a resume names (``resumable(id:token:)``), or the error the peer is
    /// answered with when there is none (`peerLost`: it ended, its resume window passed, or the
    /// token is not its own), so that it stops trying.
    func resumeTarget(id: UInt64, token: Data, node: String, resumeWindow: Duration) -> Result<Session, HandoffError> {
        if let session = resumable(id: id, token: token) { return .success(session) }
        return .failure(HandoffError(.peerLost, "\(node) has no stream pair \(id) to resume: it ended, or its resume window (\(resumeWindow)) passed"))
    }

    /// The live pairs this node opened to the originator at `endpoint`.
    func live(toDealer endpoint: String) -> [Session] {
        sessions.values.filter { $0.isLive && $0.route.peer == .dealer(endpoint) }
    }

    /// The endpoints some pair, live or failed, is routed to through this node's DEALERs (their
    /// connections must stay).
    var dealerEndpoints: Set<String> {
        var endpoints: Set<String> = []
        for case .dealer(let endpoint) in sessions.values.map(\.route.peer) { endpoints.insert(endpoint) }
        return endpoints
    }

    /// The pair to end when the node must make room (eviction): of the pairs peers opened here
    /// (this node the originator) that have waited on their peer without progress for `grace`, the
    /// one from the peer holding the most pairs, and of its pairs the one stalled longest.
    func stalledVictim(now: ContinuousClock.Instant, grace: Duration) -> Session? {
        let live = sessions.values.filter { $0.isLive && !$0.isContinuer }
        var held: [String: Int] = [:]
        for session in live { held[session.owner, default: 0] += 1 }
        let stalled = live.filter { $0.waitsOnPeer && now - $0.peersTurnSince >= grace }
        return stalled.min { a, b in
            let (heldA, heldB) = (held[a.owner]!, held[b.owner]!)
            return heldA != heldB ? heldA > heldB : (a.peersTurnSince, a.key.local) < (b.peersTurnSince, b.key.local)
        }
    }
}
