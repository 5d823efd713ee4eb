/// Where each key's value lives, by the key's hash: an open-addressing table of 64-bit words (a
/// 32-bit hash and a slot number), probed linearly, deleted from by shifting back.
///
/// The broker's cache finds each activity's slot through it, and ``HashedTable`` (a node's tables
/// that grow with the bus) each key's position. A `[String: Int32]` did the same at
/// 20 bytes a bucket and three buckets for every two keys; reserved for the cache's capacity at
/// start (growing it rehashed every id), it was as many fresh pages, written once each, as the
/// envelopes of a flood of new activities. Here a bucket is 8 bytes, and growing moves words by the
/// hash they carry, hashing nothing again, so the table starts small and doubles as keys come.
///
/// The keys stay where their values are: a lookup passes a check that compares the key with the
/// one at a candidate slot. Hashes come from `Hasher`, seeded afresh in each process, so no sender
/// can choose ids that collide.
struct SlotIndex {
    /// 0: empty; else the key's hash in the high half and its slot + 1 in the low.
    private var buckets: [UInt64]
    private var mask: Int
    /// Keys indexed.
    private(set) var count = 0

    /// With `minimumCapacity` 0, no buckets until the first insert: a table that may stay empty
    /// (one of many, such as an origin's set of ids) allocates nothing.
    init(minimumCapacity: Int = 1_024) {
        guard minimumCapacity > 0 else {
            buckets = []
            mask = 0
            return
        }
        var size = 16
        while size < 2 * minimumCapacity { size <<= 1 }
        buckets = Array(repeating: 0, count: size)
        mask = size - 1
    }

    /// The hash of a key's bytes.
    static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        return UInt32(truncatingIfNeeded: hasher.finalize())
    }

    /// The hash of a string key (its UTF-8 bytes).
    static func hash(_ key: String) -> UInt32 {
        var key = key
        return key.withUTF8 { hash(UnsafeRawBufferPointer($0)) }
    }

    /// The slot of the key with `hash` that `isKey` recognises, or `nil`.
    func slot(hash: UInt32, where isKey: (Int32) -> Bool) -> Int32? {
        if buckets.isEmpty { return nil }
        var index = Int(hash) & mask
        while true {
            let word = buckets[index]
            if word == 0 { return nil }
            if UInt32(truncatingIfNeeded: word >> 32) == hash {
                let slot = Self.slot(of: word)
                if isKey(slot) { return slot }
            }
            index = (index + 1) & mask
        }
    }

    /// Indexes `slot` under `hash` (a key not indexed yet).
    mutating func insert(_ slot: Int32, hash: UInt32) {
        precondition(slot >= 0 && slot < Int32.max, "slot \(slot) out of range")
        if 2 * (count + 1) > buckets.count { grow() }
        place(UInt64(hash) << 32 | UInt64(UInt32(slot) + 1))
        count += 1
    }

    /// Removes `slot` from under `hash`; false when it was not there.
    @discardableResult
    mutating func remove(_ slot: Int32, hash: UInt32) -> Bool {
        guard var hole = bucket(of: slot, hash: hash) else { return false }
        // Shift back each later word of the run that may sit no earlier than the hole, so that no
        // lookup meets an empty bucket before its key.
        var next = hole
        while true {
            next = (next + 1) & mask
            let word = buckets[next]
            if word == 0 { break }
            let home = Int(word >> 32) & mask
            // Whether `home` lies cyclically in (hole, next]: then the word stays where it is.
            let stays = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next)
            if !stays {
                buckets[hole] = word
                hole = next
            }
        }
        buckets[hole] = 0
        count -= 1
        return true
    }

    /// Indexes under `hash` at `new` what was at `slot` (a value that moved); false when `slot`
    /// was not there.
    @discardableResult
    mutating func move(_ slot: Int32, to new: Int32, hash: UInt32) -> Bool {
        precondition(new >= 0 && new < Int32.max, "slot \(new) out of range")
        guard let bucket = bucket(of: slot, hash: hash) else { return false }
        buckets[bucket] = UInt64(hash) << 32 | UInt64(UInt32(new) + 1)
        return true
    }

    /// Forgets every key, and the buckets with them (as when made with `minimumCapacity` 0).
    mutating func removeAll() {
        buckets = []
        mask = 0
        count = 0
    }

    /// The bucket holding `slot` under `hash`, if any.
    private func bucket(of slot: Int32, hash: UInt32) -> Int? {
        if buckets.isEmpty { return nil }
        let wanted = UInt64(hash) << 32 | UInt64(UInt32(slot) + 1)
        var index = Int(hash) & mask
        while buckets[index] != wanted {
            if buckets[index] == 0 { return nil }
            index = (index + 1) & mask
        }
        return index
    }

    /// Every slot indexed, in no order.
    var slots: some Sequence<Int32> { buckets.lazy.filter { $0 != 0 }.map(Self.slot(of:)) }

    private static func slot(of word: UInt64) -> Int32 { Int32(truncatingIfNeeded: word & 0xFFFF_FFFF) - 1 }

    private mutating func place(_ word: UInt64) {
        var index = Int(word >> 32) & mask
        while buckets[index] != 0 { index = (index + 1) & mask }
        buckets[index] = word
    }

    /// Twice the buckets, each word moved by the hash it carries.
    private mutating func grow() {
        let old = buckets
        buckets = Array(repeating: 0, count: max(16, old.count * 2))
        mask = buckets.count - 1
        for word in old where word != 0 { place(word) }
    }
}
