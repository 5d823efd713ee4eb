/// An id (an activity's, a node's) as a key of the tables that grow with the bus, its hash taken
/// once. A table of `String` keys hashes a key's 36 bytes at every lookup and insertion and again,
/// for every key it holds, at each resize, reaching each key's bytes through a pointer; and every
/// probe past a neighbour of the same length compares bytes (`memcmp`). In a profile of
/// `handoff-bench adverts` that hashing, those compares and the resizes were a fifth of the
/// subscribing node's time. Here a table hashes one word kept beside the id, and a probe compares
/// that word before the bytes.
///
/// The word is `Hasher`'s over the whole id, seeded at random per process as every `Hashable`
/// value is, so keys that collide cannot be chosen from outside (the tables then seed it again,
/// per table).
struct HashedID: Hashable, Sendable, CustomStringConvertible {
    let id: String
    let hash: Int

    init(_ id: String) {
        self.id = id
        var hasher = Hasher()
        hasher.combine(id)
        hash = hasher.finalize()
    }

    static func == (a: HashedID, b: HashedID) -> Bool { a.hash == b.hash && a.id == b.id }
    func hash(into hasher: inout Hasher) { hasher.combine(hash) }
    var description: String { id }
}
