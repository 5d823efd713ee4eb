/// How much one connection may hand libzmq towards a message it never finishes: the rule that
/// ends such a message, with no I/O. The owner tells it which connections it reads from, which of
/// them delivered a whole message, and (at each check) what the kernel says each has handed
/// libzmq so far; it names the connections to cut.
///
/// libzmq bounds its queues in whole messages (the high-water marks) and each frame in bytes
/// (`ZMQ_MAXMSGSIZE`), never the frames of one message: it keeps every frame until the message's
/// last one arrives. A libzmq peer cannot send such a message (its own queue lets a message go
/// only once it is whole), but a peer that speaks ZMTP itself can: frames marked "more", forever.
/// A raw peer sending frames of 200 bytes took a node from 36 MiB to 1.6 GiB in 6 s, and nothing
/// was freed when it hung up (docs/operations.md, "A message that never ends").
///
/// The rule: a connection that delivered no whole message between two checks has handed libzmq
/// everything since the last check at which it had as part of one unfinished message, or as ZMTP
/// commands (a heartbeat's PING and PONG, a few dozen bytes a second). Past ``bound`` it is cut. A
/// connection that delivered a whole message counts again from what it has handed over by then, so
/// one that delivers is never cut, however much it sends; what a peer sends between its last whole
/// message and the check after it is not counted, so a cut comes at most ``bound`` plus two
/// intervals' worth (``interval(watching:)``) of what one connection can send after the unfinished
/// message began. A connection is counted from when it is watched (what the kernel said it had
/// handed libzmq then), so a peer that starts its endless message at once gains nothing from the
/// wait for the first check.
struct UnfinishedMessageBound<Peer: Equatable> {
    /// The most bytes a connection may hand libzmq between two whole messages.
    let bound: Int

    /// A connection watched: its peer (the descriptor's number passes to the next connection when
    /// it closes), what it had handed libzmq at the last check it delivered by, and whether it
    /// delivered since the last check.
    private struct Watched {
        var peer: Peer
        var since: Int?
        var delivered = false
    }
    private var watched: [Int32: Watched] = [:]
    private var nextCheck: ContinuousClock.Instant?

    init(bound: Int) {
        self.bound = bound
    }

    /// How many connections are watched.
    var count: Int { watched.count }

    /// Starts watching a connection the owner reads from (accepted or connected), counted from
    /// `handed`, what the kernel said it had handed libzmq when the owner learnt of it (`nil`, not
    /// known: from the next check on). A descriptor that named another connection names this one
    /// from now on.
    mutating func watch(_ descriptor: Int32, peer: Peer, handed: Int? = nil) {
        watched[descriptor] = Watched(peer: peer, since: handed)
    }

    /// A whole message came in on `descriptor` (libzmq's `ZMQ_SRCFD` of its first frame).
    mutating func delivered(on descriptor: Int32) {
        watched[descriptor]?.delivered = true
    }

    /// How long between two checks with `count` connections watched: 50 ms, and 200 µs a
    /// connection past 250. Each check asks the kernel twice a connection, about 2 µs, so checks
    /// take about 1 % of a CPU past 250 connections, less below. What a peer sends between two
    /// checks is what it may send past the bound: at loopback's 460 MB/s, about 23 MB.
    static func interval(watching count: Int) -> Duration {
        max(.milliseconds(50), .microseconds(200) * count)
    }

    /// When the next check is due: `nil` while no connection is watched (nothing to wake for), or
    /// before the first call to ``checkIfDue(now:read:)`` since one was.
    var nextCheckDue: ContinuousClock.Instant? { nextCheck }

    /// ``check(read:)`` when due, else nothing: the owner calls it as often as it likes.
    mutating func checkIfDue(now: ContinuousClock.Instant, read: (Int32, Peer) -> Int?) -> [Unfinished] {
        guard !watched.isEmpty else {
            nextCheck = nil
            return []
        }
        guard let due = nextCheck else {
            nextCheck = now + Self.interval(watching: watched.count)
            return []
        }
        guard now >= due else { return [] }
        nextCheck = now + Self.interval(watching: watched.count)
        return check(read: read)
    }

    /// A connection past the bound: to cut, already forgotten here.
    struct Unfinished: Equatable {
        var descriptor: Int32
        var peer: Peer
        /// Bytes it handed libzmq since it last delivered a whole message (as of the check).
        var bytes: Int
    }

    /// One check: `read` tells what each watched connection has handed libzmq so far, as the kernel
    /// counts it (`nil`: it has gone, and is forgotten). Returns the connections past the bound.
    mutating func check(read: (Int32, Peer) -> Int?) -> [Unfinished] {
        var unfinished: [Unfinished] = []
        for (descriptor, var connection) in watched {
            guard let handed = read(descriptor, connection.peer) else {
                watched[descriptor] = nil
                continue
            }
            if let since = connection.since, !connection.delivered, handed - since > bound {
                unfinished.append(Unfinished(descriptor: descriptor, peer: connection.peer, bytes: handed - since))
                watched[descriptor] = nil
                continue
            }
            // Counted afresh: it delivered, it is new, or its count went back (the descriptor now
            // names a connection not yet watched, whose own count starts low).
            if connection.since == nil || connection.delivered || handed < connection.since! {
                connection.since = handed
            }
            connection.delivered = false
            watched[descriptor] = connection
        }
        return unfinished
    }
}
