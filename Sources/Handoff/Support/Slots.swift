/// Values in numbered slots that keep their number while they live: what refers to one holds a
/// plain `Int32`, no reference count, and a freed number is given to the next value inserted.
struct Slots<Element> {
    private var storage: [Element?] = []
    private var free: [Int32] = []

    mutating func reserveCapacity(_ count: Int) { storage.reserveCapacity(count) }

    /// Stores a value in a free slot (or a new one); returns its number.
    mutating func insert(_ value: consuming Element) -> Int32 {
        if let slot = free.popLast() {
            storage[Int(slot)] = value
            return slot
        }
        storage.append(value)
        return Int32(storage.count - 1)
    }

    /// Frees a slot; returns what it held.
    @discardableResult
    mutating func remove(_ slot: Int32) -> Element? {
        guard let value = storage[Int(slot)] else { return nil }
        storage[Int(slot)] = nil
        free.append(slot)
        return value
    }

    /// The value in a live slot (`nil` for a free one); set through it in place.
    subscript(slot: Int32) -> Element? {
        // Read in place: `slots[i]!.field` borrows the entry rather than copying it whole (each
        // copy a reference count per reference it holds).
        _read { yield storage[Int(slot)] }
        _modify { yield &storage[Int(slot)] }
    }

    /// One past the highest slot ever used: a cursor over the slots ends here.
    var end: Int { storage.count }

    /// Every live value with its slot, in slot order.
    var live: some Sequence<(slot: Int32, value: Element)> {
        storage.indices.lazy.compactMap { index in storage[index].map { (Int32(index), $0) } }
    }
}
