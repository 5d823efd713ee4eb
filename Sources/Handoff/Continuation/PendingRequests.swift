/// The continue requests a node waits on, by correlation id: who each went to, for which type, and
/// until when (the node's tick fails them after that, a disconnect fails those to its endpoint,
/// shutdown fails all). Generic over what waits, so that it is tested without sockets or tasks.
struct PendingRequests<Waiter> {
    struct Request {
        let waiter: Waiter
        let endpoint: String
        let activityType: String
        /// When the request times out: checked on the node's tick (a timer task per request cost a
        /// task, a dispatch timer and a wake-up at cancellation on every continue).
        let deadline: ContinuousClock.Instant
    }

    private var requests: [UInt64: Request] = [:]

    var isEmpty: Bool { requests.isEmpty }
    var count: Int { requests.count }

    /// The endpoints some request waits on (their connections must stay).
    var endpoints: Set<String> { Set(requests.values.map(\.endpoint)) }

    mutating func add(_ id: UInt64, _ request: Request) {
        requests[id] = request
    }

    /// Takes a request out: the first outcome wins, a later one finds nothing.
    mutating func remove(_ id: UInt64) -> Request? {
        requests.removeValue(forKey: id)
    }

    /// The requests past their deadline, soonest first.
    func expired(at now: ContinuousClock.Instant) -> [UInt64] {
        requests.filter { $0.value.deadline <= now }.sorted { $0.value.deadline < $1.value.deadline }.map(\.key)
    }

    /// The requests that went to `endpoint`.
    func ids(to endpoint: String) -> [UInt64] {
        requests.filter { $0.value.endpoint == endpoint }.map(\.key).sorted()
    }

    /// Every request's id.
    var ids: [UInt64] { requests.keys.sorted() }

    func request(_ id: UInt64) -> Request? { requests[id] }
}
