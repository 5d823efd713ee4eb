/// What each subscriber's connection holds among the backend's subscriptions, counted against
/// ``Broker/SubscriptionBounds``: the rule that ends a subscription flood, with no I/O (the broker
/// loop hands it each subscription frame with the connection it came in on, and cuts the
/// connections it names).
///
/// A connection is its descriptor and its peer (`Peer`: the kernel's name for it, so that a number
/// handed to a new connection starts afresh). It is counted as libzmq's XPUB keeps it: a
/// subscription adds its topic once, however often it is repeated; a withdrawal on that connection
/// removes it, and one for a topic the connection never held (libzmq passes those up too) changes
/// nothing. (The backend's XPUB, verbose for subscriptions, passes a withdrawal up only when no
/// other connection holds the topic: one withdrawn while others hold it stays counted until its
/// connection goes. The count errs towards more, never less, than libzmq keeps.) A connection
/// that goes past a bound is cut: its topics are let go here as libzmq lets them go, and what it
/// still sends until it is gone is refused.
///
/// Each topic is kept as its 64-bit hash (Swift's `Hasher`, seeded afresh in every process, so a
/// member cannot aim at a collision) and its length: a few dozen bytes however long the topic,
/// against libzmq's 35 a byte.
struct SubscriptionLedger<Peer: Equatable> {
    /// What one connection or key holds.
    struct Held: Equatable, Sendable {
        var subscriptions = 0
        var bytes = 0
    }

    /// What to do with a subscription frame.
    enum Verdict: Equatable, Sendable {
        /// Within the bounds (or from a connection not counted): handle it as usual.
        case within
        /// This subscription took its connection past a bound (`overKey`: the key's bound, over
        /// all its connections): cut the connection, and do nothing else with it.
        case cut(held: Held, overKey: Bool)
        /// From a connection already cut, not yet gone: do nothing with it.
        case refused
    }

    let bounds: Broker.SubscriptionBounds
    private struct Connection {
        var peer: Peer
        var key: [UInt8]?
        var topics: [Int: Int] = [:]
        var held = Held()
        var cut = false
    }
    private var connections: [Int32: Connection] = [:]
    private var keys: [[UInt8]: Held] = [:]
    /// When the owner next lets go of the connections that have gone (``forgetGoneIfDue(now:)``).
    var nextPrune: ContinuousClock.Instant?

    init(bounds: Broker.SubscriptionBounds) {
        self.bounds = bounds
    }

    /// A subscription to `topic` (the frame without its leading 1) on connection `descriptor`
    /// with `peer`, authenticated with `key` (`nil` on an open broker).
    mutating func subscribed(_ topic: UnsafeRawBufferPointer, descriptor: Int32, peer: Peer, key: [UInt8]?) -> Verdict {
        var connection = take(descriptor, peer: peer, key: key)
        defer { connections[descriptor] = connection }
        guard !connection.cut else { return .refused }
        let hash = Self.hash(topic)
        guard connection.topics[hash] == nil else { return .within }
        var afterward = connection.held
        afterward.subscriptions += 1
        afterward.bytes += topic.count
        let overConnection = afterward.subscriptions > bounds.perConnection || afterward.bytes > bounds.bytesPerConnection
        var keyAfterward = key.map { keys[$0, default: Held()] }
        keyAfterward?.subscriptions += 1
        keyAfterward?.bytes += topic.count
        let overKey = keyAfterward.map { $0.subscriptions > bounds.perKey || $0.bytes > bounds.bytesPerKey } ?? false
        if overConnection || overKey {
            release(connection)
            connection.topics = [:]
            connection.held = Held()
            connection.cut = true
            return .cut(held: afterward, overKey: !overConnection)
        }
        connection.topics[hash] = topic.count
        connection.held = afterward
        if let key { keys[key] = keyAfterward }
        return .within
    }

    /// A withdrawal of `topic` on connection `descriptor` with `peer`.
    mutating func unsubscribed(_ topic: UnsafeRawBufferPointer, descriptor: Int32, peer: Peer) {
        // Taken out of the table while it changes, so that its topics are changed in place, not
        // copied whole for each withdrawal.
        guard var connection = connections.removeValue(forKey: descriptor) else { return }
        defer { connections[descriptor] = connection }
        guard connection.peer == peer, !connection.cut,
              let length = connection.topics.removeValue(forKey: Self.hash(topic)) else { return }
        connection.held.subscriptions -= 1
        connection.held.bytes -= length
        if let key = connection.key { subtract(Held(subscriptions: 1, bytes: length), from: key) }
    }

    /// Lets go of the connections `gone` says are closed, or now another's (the loop asks the
    /// kernel, now and then): libzmq let go of their subscriptions when they went. Returns how many.
    @discardableResult
    mutating func forget(where gone: (Int32, Peer) -> Bool) -> Int {
        let closed = connections.filter { gone($0.key, $0.value.peer) }
        for (descriptor, connection) in closed {
            release(connection)
            connections[descriptor] = nil
        }
        return closed.count
    }

    /// What connection `descriptor` holds (zero for one not counted or cut).
    func held(descriptor: Int32) -> Held { connections[descriptor]?.held ?? Held() }
    /// What a key holds over its connections.
    func held(key: [UInt8]) -> Held { keys[key] ?? Held() }
    /// The connections counted (cut ones included, until they are gone).
    var connectionCount: Int { connections.count }

    /// The entry for `descriptor`, taken out of the table (the caller puts it back: while it is out,
    /// its topics are changed in place, not copied whole for each subscription); afresh when the
    /// number now belongs to another peer.
    private mutating func take(_ descriptor: Int32, peer: Peer, key: [UInt8]?) -> Connection {
        if let known = connections.removeValue(forKey: descriptor) {
            if known.peer == peer { return known }
            release(known)
        }
        return Connection(peer: peer, key: key)
    }

    /// Takes what `connection` holds off its key's count.
    private mutating func release(_ connection: Connection) {
        guard !connection.cut, let key = connection.key else { return }
        subtract(connection.held, from: key)
    }

    private mutating func subtract(_ held: Held, from key: [UInt8]) {
        guard var total = keys[key] else { return }
        total.subscriptions -= held.subscriptions
        total.bytes -= held.bytes
        keys[key] = total.subscriptions <= 0 ? nil : total
    }

    private static func hash(_ topic: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes: topic)
        return hasher.finalize()
    }
}
