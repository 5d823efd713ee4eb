import Foundation

/// Strings a reader of bus envelopes made recently, handed out again when the same bytes come:
/// a follower hears every advertisement of the bus, and most of their strings repeat from message
/// to message (the sender's and the origin's id, name and host, the activity type, the continue
/// endpoint). Each new `String` of over 15 bytes is an allocation, a copy and a UTF-8 check; one
/// found here is a comparison of the bytes and a reference count.
///
/// Bounded: a fixed number of slots, each holding the last string that fell into it, so bytes
/// that never repeat (a peer sending fresh ids, hostile or not) only replace slots and cost one
/// failed comparison each. A string handed out is always exactly the bytes read.
///
/// The same for byte fields that repeat (the sender's and the origin's CURVE key on a secure bus):
/// a `Data` of over 14 bytes is an allocation too.
///
/// Not thread-safe: one reader at a time (a node's actor owns its table).
public final class WireStrings {
    /// Shorter strings are stored inside the `String` itself (no allocation): not worth a slot.
    static let shortestKept = 16
    private static let slotBits = 6
    private static let slotCount = 1 << slotBits
    /// Memory of its own (an array in a class is retained and checked for exclusive access at
    /// each use: two reference counts a lookup).
    private let slots: UnsafeMutablePointer<String?>
    private let dataSlots: UnsafeMutablePointer<Data?>
    /// Strings found here, and strings made and kept (for the tests).
    private(set) var hits = 0
    private(set) var misses = 0

    public init() {
        slots = .allocate(capacity: Self.slotCount)
        slots.initialize(repeating: nil, count: Self.slotCount)
        dataSlots = .allocate(capacity: Self.slotCount)
        dataSlots.initialize(repeating: nil, count: Self.slotCount)
    }

    deinit {
        slots.deinitialize(count: Self.slotCount)
        slots.deallocate()
        dataSlots.deinitialize(count: Self.slotCount)
        dataSlots.deallocate()
    }

    /// Slots holding a string (for the tests).
    var kept: Int { (0..<Self.slotCount).count { slots[$0] != nil } }

    /// The string of `body` (checked to be UTF-8 by `make` when it is made): the one kept for the
    /// same bytes, or `make`'s, kept for next time.
    @inline(__always)
    func string<Failure: Error>(_ body: UnsafeRawBufferPointer, make: () throws(Failure) -> String) throws(Failure) -> String {
        try kept(body, in: slots, make: make) { kept, body in
            // A string made here is native, its UTF-8 contiguous.
            kept.utf8.withContiguousStorageIfAvailable { Self.same(UnsafeRawBufferPointer($0), body) } ?? false
        }
    }

    /// The bytes of `body` as `Data`: the one kept for the same bytes, or a new one, kept for next
    /// time.
    @inline(__always)
    func data(_ body: UnsafeRawBufferPointer) -> Data {
        kept(body, in: dataSlots, make: { Data(body) }) { kept, body in kept.withUnsafeBytes { Self.same($0, body) } }
    }

    /// The value kept in `slots` for `body`'s bytes (`holds` says whether a kept one is of them),
    /// or `make`'s, kept for next time.
    @inline(__always)
    private func kept<Value, Failure: Error>(
        _ body: UnsafeRawBufferPointer, in slots: UnsafeMutablePointer<Value?>, make: () throws(Failure) -> Value,
        holds: (Value, UnsafeRawBufferPointer) -> Bool
    ) throws(Failure) -> Value {
        guard body.count >= Self.shortestKept, let base = body.baseAddress else { return try make() }
        let slot = Self.slot(base, count: body.count)
        if let kept = slots[slot], holds(kept, body) {
            hits &+= 1
            return kept
        }
        let made = try make()
        misses &+= 1
        slots[slot] = made
        return made
    }

    /// The slot for these bytes: the last eight (ids and endpoints differ most at their end) and
    /// the length, mixed (Fibonacci hashing), top bits.
    @inline(__always)
    static func slot(_ base: UnsafeRawPointer, count: Int) -> Int {
        let last = base.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
        let mixed = (last ^ UInt64(truncatingIfNeeded: count)) &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: mixed >> UInt64(64 - slotBits))
    }

    @inline(__always)
    private static func same(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        a.count == b.count && (a.isEmpty || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0)
    }
}
