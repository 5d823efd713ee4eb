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
/// The rule. libzmq reads ahead of its owner: whole messages wait in a connection's queue, up to
/// the socket's receive high-water mark, until the owner reads them, so bytes handed over and not
/// yet delivered are not by themselves a message left unfinished (a node behind a burst of 50,000
/// advertisements had handed libzmq 10 MB of whole ones it had not read yet, and was cut as if
/// hostile, again and again: 2026-12-05). But once the owner has found its socket empty (a receive
/// that did not wait found nothing, or a poll or a `ZMQ_EVENTS` reading found it not readable:
/// ``Socket/emptyReceives``; the owner also reads each socket's at the check, in case it waits on
/// it with nothing to read), it had read every whole message libzmq held: what a connection that
/// delivered none had handed libzmq before then is part of an unfinished message, or ZMTP
/// commands (a heartbeat's PING and PONG, a few dozen bytes a second).
/// So at each check, a connection that delivered no whole message since the check it last did,
/// whose socket was found empty since the check before this one, is cut if what it had handed by
/// that check since it last delivered is past ``bound``. While its owner never finds the socket
/// empty (behind for good), it is cut only past ``bound`` and all its queue may hold whole (its
/// `queueAllowance`). A connection that delivered counts again from what it has handed over by
/// the check after, so one that delivers is never cut, however much it sends; a cut comes at most
/// ``bound`` plus three intervals' worth (``interval(watching:)``) of what one connection can send
/// after the unfinished message began. A connection is counted from when it is watched (what the
/// kernel said it had handed libzmq then), so a peer that starts its endless message at once gains
/// nothing from the wait for the first check.
struct UnfinishedMessageBound<Peer: Equatable> {
    /// The most bytes a connection may hand libzmq between two whole messages.
    let bound: Int

    /// A connection watched: its peer (the descriptor's number passes to the next connection when
    /// it closes), the socket it reaches the owner through (`source`, the owner's number) and what
    /// that socket's queue may hold of it whole, what it had handed libzmq at the last check it
    /// delivered by and at the last check, and whether it delivered since the last check.
    private struct Watched {
        var peer: Peer
        var source: Int
        var queueAllowance: Int
        var since: Int?
        var previous: Int?
        var delivered = false
    }
    private var watched: [Int32: Watched] = [:]
    /// Each source's count of empty receives at the last check.
    private var emptyReceivesSeen: [Int: UInt64] = [:]
    private var nextCheck: ContinuousClock.Instant?

    init(bound: Int) {
        self.bound = bound
    }

    /// How many connections are watched.
    var count: Int { watched.count }

    /// Starts watching a connection the owner reads from (accepted or connected) through socket
    /// `source`, whose queue may hold `queueAllowance` bytes of its messages whole; counted from
    /// `handed`, what the kernel said it had handed libzmq when the owner learnt of it (`nil`, not
    /// known: from the next check on). A descriptor that named another connection names this one
    /// from now on.
    mutating func watch(_ descriptor: Int32, peer: Peer, source: Int = 0, queueAllowance: Int, handed: Int? = nil) {
        watched[descriptor] = Watched(peer: peer, source: source, queueAllowance: queueAllowance, since: handed, previous: handed)
    }

    /// What a socket's queue may hold whole for one connection: `highWaterMark` messages (0:
    /// unlimited) of `frames` frames of up to `largestFrame` bytes, with ZMTP's framing.
    static func queueAllowance(highWaterMark: Int32, frames: Int, largestFrame: Int) -> Int {
        let most = Int.max / 4
        guard highWaterMark > 0 else { return most }
        let (perMessage, over) = frames.multipliedReportingOverflow(by: min(largestFrame, most) + 9)
        let (all, overAgain) = Int(highWaterMark).multipliedReportingOverflow(by: perMessage)
        return over || overAgain ? most : min(all, most)
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

    /// How a source (a socket) stands: its count of empty receives, and whether the owner found
    /// it empty now, at the check.
    struct SourceEmptiness {
        var emptyReceives: UInt64
        var foundEmptyNow = false
    }

    /// ``check(read:emptiness:)`` when due, else nothing: the owner calls it as often as it likes.
    mutating func checkIfDue(now: ContinuousClock.Instant, read: (Int32, Peer) -> Int?, emptiness: (Int) -> SourceEmptiness?) -> [Unfinished] {
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
        return check(read: read, emptiness: emptiness)
    }

    /// A connection past the bound: to cut, already forgotten here.
    struct Unfinished: Equatable {
        var descriptor: Int32
        var peer: Peer
        /// Bytes it handed libzmq since it last delivered a whole message (as of the check).
        var bytes: Int
    }

    /// One check: `read` tells what each watched connection has handed libzmq so far, as the kernel
    /// counts it (`nil`: it has gone, and is forgotten); `emptiness` how each source stands (`nil`:
    /// not known, taken as not found empty). Returns the connections past the bound.
    mutating func check(read: (Int32, Peer) -> Int?, emptiness: (Int) -> SourceEmptiness?) -> [Unfinished] {
        // Which sources were found empty since the last check, each asked once.
        var foundEmpty: [Int: Bool] = [:]
        func wasFoundEmpty(_ source: Int) -> Bool {
            if let known = foundEmpty[source] { return known }
            let now = emptiness(source)
            let seen = emptyReceivesSeen[source]
            let empty = now.map { $0.foundEmptyNow || (seen != nil && $0.emptyReceives != seen) } ?? false
            if let now { emptyReceivesSeen[source] = now.emptyReceives }
            foundEmpty[source] = empty
            return empty
        }
        var unfinished: [Unfinished] = []
        for (descriptor, var connection) in watched {
            let empty = wasFoundEmpty(connection.source)
            guard let handed = read(descriptor, connection.peer) else {
                watched[descriptor] = nil
                continue
            }
            if !connection.delivered, let since = connection.since, let previous = connection.previous, handed >= previous {
                // By the last check it had handed `previous`, and the owner has read everything
                // whole since: the rest of that is unfinished. Or, behind for good, past its queue.
                let unfinishedByLastCheck = empty ? previous - since : 0
                if unfinishedByLastCheck > bound || handed - since > bound + connection.queueAllowance {
                    unfinished.append(Unfinished(descriptor: descriptor, peer: connection.peer, bytes: handed - since))
                    watched[descriptor] = nil
                    continue
                }
            } else {
                // Counted afresh: it delivered, it is new, or its count went back (the descriptor
                // now names a connection not yet watched, whose own count starts low).
                connection.since = handed
            }
            connection.previous = handed
            connection.delivered = false
            watched[descriptor] = connection
        }
        // Sources no connection reaches any more are forgotten.
        if emptyReceivesSeen.count > foundEmpty.count { emptyReceivesSeen = emptyReceivesSeen.filter { foundEmpty[$0.key] != nil } }
        return unfinished
    }
}
