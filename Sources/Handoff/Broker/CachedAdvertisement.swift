import Foundation
import HandoffWire

/// What the cache takes of an advertisement: its fields as they lie in the envelope (the second
/// frame of the message stored with it), read by ``WireBusFields``.
///
/// Ranges, not values: the cache hashes and compares the id where it lies, and keeps it inside its
/// copy of the message, so storing an advertisement makes no `String` of it.
struct CachedAdvertisement {
    /// Where the activity's id lies.
    var activityID: Range<Int>
    /// Who the activity belongs to, for the per-origin quota: where its origin's node id and CURVE
    /// key (empty without CURVE) lie.
    var origin: WireBusFields.Node
    var version: UInt64
    /// The presence lease; 0 when unset.
    var leaseMs: UInt32
    /// The activity's expiration date, if it has one.
    var expiresAt: Date?
}

/// Whether a string's UTF-8 is exactly `bytes` (an origin's id kept as a `String`, against one
/// where it lies in an envelope).
func utf8(of string: String, equals bytes: UnsafeRawBufferPointer) -> Bool {
    let utf8 = string.utf8
    guard utf8.count == bytes.count else { return false }
    return utf8.withContiguousStorageIfAvailable { sameBytes(UnsafeRawBufferPointer($0), bytes) } ?? utf8.elementsEqual(bytes)
}

/// Whether two runs of bytes are the same.
@inline(__always)
func sameBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    a.count == b.count && (a.isEmpty || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0)
}
