/// A key that carries its hash, taken once (``HashedID``, or a pair of them).
protocol HashedKey: Equatable {
    /// The key's hash: `Hasher`'s, seeded at random per process, or a mix of such hashes.
    var hashWord: Int { get }
}

extension HashedID: HashedKey {
    var hashWord: Int { hash }
}

/// A table of the keys that grow with the bus (activities known, activities current, replay
/// entries), which never hashes a key: each carries its hash (``HashedKey``).
///
/// A `Dictionary` of such keys still ran `Hasher` over the kept word at every lookup and insertion
/// and again over every key at each resize, since it seeds each table afresh. In a profile of
/// `handoff-bench adverts` (50,000 advertisements) the subscribing node's tables were a fifth of
/// its thread, and their growth alone an eighth. Here keys and values sit in two dense arrays,
/// found through a ``SlotIndex`` (the hash's low 32 bits and the position, 8 bytes a bucket): a
/// lookup compares words and then the key at a candidate position, and growing moves words by the
/// hash they carry. Removal moves the last entry into the hole, so positions hold only until the
/// next removal.
///
/// Iteration is in the arrays' order: insertion order, save for removals. Unlike a `Dictionary`'s,
/// it does not change from one process to the next, which the simulator's replay relies on.
struct HashedTable<Key: HashedKey, Value> {
    private(set) var keys: [Key] = []
    private(set) var values: [Value] = []
    private var index = SlotIndex(minimumCapacity: 0)

    init() {}

    var count: Int { keys.count }
    var isEmpty: Bool { keys.isEmpty }

    private static func word(_ key: Key) -> UInt32 { UInt32(truncatingIfNeeded: key.hashWord) }

    /// Where `key` is, if it is here (valid until the next removal).
    func position(of key: Key) -> Int? {
        index.slot(hash: Self.word(key)) { keys[Int($0)] == key }.map { Int($0) }
    }

    /// The value at a position, read and changed in place.
    subscript(at position: Int) -> Value {
        _read { yield values[position] }
        _modify { yield &values[position] }
    }

    /// The key at a position.
    func key(at position: Int) -> Key { keys[position] }

    /// The value of `key`; setting `nil` removes it.
    subscript(key: Key) -> Value? {
        get { position(of: key).map { values[$0] } }
        set {
            if let newValue { updateValue(newValue, forKey: key) } else { removeValue(forKey: key) }
        }
    }

    /// Adds a key that is not here yet; returns its position.
    @discardableResult
    mutating func insertNew(_ key: Key, _ value: Value) -> Int {
        let position = keys.count
        index.insert(Int32(position), hash: Self.word(key))
        keys.append(key)
        values.append(value)
        return position
    }

    /// Sets the value of `key`; returns the one it replaced, if any.
    @discardableResult
    mutating func updateValue(_ value: Value, forKey key: Key) -> Value? {
        guard let position = position(of: key) else {
            insertNew(key, value)
            return nil
        }
        let old = values[position]
        values[position] = value
        return old
    }

    /// Takes `key` out; returns its value, if it was here.
    @discardableResult
    mutating func removeValue(forKey key: Key) -> Value? {
        guard let position = position(of: key) else { return nil }
        return remove(at: position)
    }

    /// Takes out the entry at a position (the last entry moves into it); returns its value.
    @discardableResult
    mutating func remove(at position: Int) -> Value {
        index.remove(Int32(position), hash: Self.word(keys[position]))
        let last = keys.count - 1
        if position != last {
            index.move(Int32(last), to: Int32(position), hash: Self.word(keys[last]))
            keys.swapAt(position, last)
            values.swapAt(position, last)
        }
        keys.removeLast()
        return values.removeLast()
    }

    /// Takes out every entry for which `shouldRemove` is true.
    mutating func removeAll(where shouldRemove: (Key, Value) -> Bool) {
        var position = 0
        while position < keys.count {
            // The last entry moves into a removed one's place and is looked at next.
            if shouldRemove(keys[position], values[position]) { remove(at: position) } else { position += 1 }
        }
    }

    /// Takes out every entry, and the room they took.
    mutating func removeAll() {
        keys = []
        values = []
        index.removeAll()
    }
}

extension HashedTable where Value == Void {
    /// Whether `key` is here (the table used as a set).
    func contains(_ key: Key) -> Bool { position(of: key) != nil }

    /// Adds `key` unless it is here; returns whether it was added.
    @discardableResult
    mutating func insert(_ key: Key) -> Bool {
        if contains(key) { return false }
        insertNew(key, ())
        return true
    }

    /// Takes `key` out; returns whether it was here.
    @discardableResult
    mutating func remove(_ key: Key) -> Bool { removeValue(forKey: key) != nil }
}
