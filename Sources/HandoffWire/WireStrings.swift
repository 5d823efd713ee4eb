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
    static let slotBits = 6
    static let slotCount = 1 << slotBits
    /// The table's memory, which this object owns, as a reader uses it.
    let slots: Slots

    public init() { slots = Slots() }

    deinit { slots.deallocate() }

    /// Strings found here, and strings made and kept (for the tests).
    var hits: Int { slots.counters[0] }
    var misses: Int { slots.counters[1] }
    /// Slots holding a string (for the tests).
    var kept: Int { (0..<Self.slotCount).count { slots.strings[$0] != nil } }

    /// The string of `body` (checked to be UTF-8 by `make` when it is made): the one kept for the
    /// same bytes, or `make`'s, kept for next time.
    func string<Failure: Error>(_ body: UnsafeRawBufferPointer, make: () throws(Failure) -> String) throws(Failure) -> String {
        try slots.string(body, make: make)
    }

    /// The bytes of `body` as `Data`: the one kept for the same bytes, or a new one, kept for next
    /// time.
    func data(_ body: UnsafeRawBufferPointer) -> Data { slots.data(body) }

    /// The table as pointers into memory of its own, which a reader holds and copies freely: an
    /// object in a reader (or an array in a class) is retained and released at each use, two
    /// reference counts a string, where the string handed out takes one. Valid while the
    /// ``WireStrings`` that made it lives.
    struct Slots {
        let strings: UnsafeMutablePointer<String?>
        let data: UnsafeMutablePointer<Data?>
        /// A copy of the bytes of what each slot holds: a lookup compares against it with no
        /// access to the kept `String` or `Data` (reading a kept value's bytes retained it).
        let stringBytes: UnsafeMutablePointer<UnsafeMutableRawBufferPointer>
        let dataBytes: UnsafeMutablePointer<UnsafeMutableRawBufferPointer>
        /// Hits, then misses.
        let counters: UnsafeMutablePointer<Int>

        fileprivate init() {
            let count = WireStrings.slotCount
            let empty = UnsafeMutableRawBufferPointer(start: nil, count: 0)
            strings = .allocate(capacity: count)
            strings.initialize(repeating: nil, count: count)
            data = .allocate(capacity: count)
            data.initialize(repeating: nil, count: count)
            stringBytes = .allocate(capacity: count)
            stringBytes.initialize(repeating: empty, count: count)
            dataBytes = .allocate(capacity: count)
            dataBytes.initialize(repeating: empty, count: count)
            counters = .allocate(capacity: 2)
            counters.initialize(repeating: 0, count: 2)
        }

        fileprivate func deallocate() {
            let count = WireStrings.slotCount
            for slot in 0..<count {
                stringBytes[slot].deallocate()
                dataBytes[slot].deallocate()
            }
            strings.deinitialize(count: count)
            strings.deallocate()
            data.deinitialize(count: count)
            data.deallocate()
            stringBytes.deallocate()
            dataBytes.deallocate()
            counters.deallocate()
        }

        @inline(__always)
        func string<Failure: Error>(_ body: UnsafeRawBufferPointer, make: () throws(Failure) -> String) throws(Failure) -> String {
            try kept(body, in: strings, bytes: stringBytes, make: make)
        }

        @inline(__always)
        func data(_ body: UnsafeRawBufferPointer) -> Data {
            kept(body, in: data, bytes: dataBytes, make: { Data(body) })
        }

        /// The value kept in `values` for `body`'s bytes, or `make`'s, kept for next time.
        @inline(__always)
        private func kept<Value, Failure: Error>(
            _ body: UnsafeRawBufferPointer, in values: UnsafeMutablePointer<Value?>, bytes: UnsafeMutablePointer<UnsafeMutableRawBufferPointer>,
            make: () throws(Failure) -> Value
        ) throws(Failure) -> Value {
            guard body.count >= WireStrings.shortestKept, let base = body.baseAddress else { return try make() }
            let slot = WireStrings.slot(base, count: body.count)
            let keptBytes = bytes[slot]
            if keptBytes.count == body.count, memcmp(keptBytes.baseAddress!, base, body.count) == 0, let kept = values[slot] {
                counters[0] &+= 1
                return kept
            }
            let made = try make()
            counters[1] &+= 1
            values[slot] = made
            keptBytes.deallocate()
            let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: body.count, alignment: 8)
            copy.copyMemory(from: body)
            bytes[slot] = copy
            return made
        }
    }

    /// The slot for these bytes: the last eight (ids and endpoints differ most at their end) and
    /// the length, mixed (Fibonacci hashing), top bits.
    @inline(__always)
    static func slot(_ base: UnsafeRawPointer, count: Int) -> Int {
        let last = base.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
        let mixed = (last ^ UInt64(truncatingIfNeeded: count)) &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: mixed >> UInt64(64 - slotBits))
    }
}
