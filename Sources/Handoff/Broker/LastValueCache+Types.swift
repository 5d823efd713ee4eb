// The cache's nested types: its entries and origins, what a store did, an id looked up.

import Foundation
import HandoffWire
import ZeroMQ

extension LastValueCache {
    /// Nanoseconds since the cache's ``epoch``.
    typealias Ticks = Int64

    /// An entry's item in the expiry heap: due no later than the entry's expiry.
    struct Deadline: Comparable {
        var expiry: Ticks
        var slot: Int32
        var generation: UInt64
        static func < (a: Deadline, b: Deadline) -> Bool { a.expiry < b.expiry }
    }

    /// A cached activity, in its slot.
    struct Entry {
        /// Where its id lies in ``frames`` (a copy of its own would be an allocation per entry).
        var id: Range<Int>
        /// The id's hash in ``index``.
        var hash: UInt32
        /// The topic's bytes, then the envelope's.
        var frames: JoinedFrames
        /// Its origin's slot in ``origins``.
        var origin: Int32
        /// The site it came from (its index in ``siteNames``; -1: this broker's own, or unknown).
        var site: Int32 = -1
        /// Its neighbours in its origin's list (-1: none).
        var previousOfOrigin: Int32 = -1
        var nextOfOrigin: Int32 = -1
        var originKey: [UInt8]
        var version: UInt64
        var expiry: Ticks
        /// Which arrival of an id in this slot the entry is (a removed id that comes back is a new one).
        var generation: UInt64
        /// When the entry's one live heap item is due.
        var check: Ticks

        /// Whether its id is `bytes`.
        func hasID(_ bytes: UnsafeRawBufferPointer) -> Bool {
            guard id.count == bytes.count else { return false }
            return frames.withBytes { sameBytes(WireBusFields.bytes(id, in: $0), bytes) }
        }

        /// Its id, as a value.
        var idString: String { frames.withBytes { WireBusFields.string(id, in: $0) } }
    }

    /// An origin with cached activities: its node id, how many, and the first of its list.
    struct Origin {
        var id: String
        /// The id's hash in ``originIndex``.
        var hash: UInt32
        var count: Int
        var first: Int32
    }

    /// What ``store(_:frames:now:)`` did.
    enum Outcome: Equatable {
        /// A new activity, or a newer (or equal, renewing) version of a cached one.
        case stored
        /// A cached newer version wins; nothing changed.
        case stale
        /// Already expired: removed (if it was cached) rather than stored.
        case expired
        /// A new activity of an origin that has its quota cached already: refused.
        case overQuota
        /// A new activity whose origin's key has its quota cached already, over all the nodes
        /// that use it: refused.
        case overKeyQuota
    }

    /// An id looked up: its hash and, when it is cached, its entry's slot. Good until the cache
    /// next changes: a broker looks an advertisement's id up once for the sender check and the store.
    struct Lookup {
        let hash: UInt32
        let slot: Int32?
    }
}
