import Foundation
import HandoffWire
import SwiftProtobuf
import ZeroMQ

/// What crosses a link between the brokers of two sites (wire.proto, "Sites"): a bus message as
/// three frames (topic, envelope, ``HandoffWire/WireSiteHop``), sent down to one site under
/// `L:` + its name + `|` + the topic, which that site's broker subscribed to for its own
/// subscribers' interest.
extension Topic {
    /// A message for one site: `L:` + site name + `|` + the bus topic.
    static let sitePrefix = "L:"
    static let sitePrefixBytes = Array(sitePrefix.utf8)
    static let siteSeparator = UInt8(ascii: "|")

    /// `L:` + `site` + `|` + `topic`.
    static func site(_ site: [UInt8], _ topic: UnsafeRawBufferPointer) -> [UInt8] {
        var bytes = sitePrefixBytes
        bytes.reserveCapacity(sitePrefixBytes.count + site.count + 1 + topic.count)
        bytes += site
        bytes.append(siteSeparator)
        bytes += topic
        return bytes
    }

    /// `L:` + `site` + `|` + `topic`.
    static func site(_ site: [UInt8], _ topic: [UInt8]) -> [UInt8] {
        topic.withUnsafeBytes { Topic.site(site, $0) }
    }

    /// The site and the bus topic of a site topic, or `nil` when `bytes` is none (slices of
    /// `bytes`, no copy).
    static func splitSite<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> (site: Bytes.SubSequence, topic: Bytes.SubSequence)? {
        guard bytes.starts(with: sitePrefixBytes) else { return nil }
        let rest = bytes.dropFirst(sitePrefixBytes.count)
        guard let bar = rest.firstIndex(of: siteSeparator) else { return nil }
        return (rest[..<bar], rest[rest.index(after: bar)...])
    }
}

/// A site's name on the links between brokers: 1 to 64 bytes of letters, digits, `.`, `_`, `-`.
public struct SiteName: Hashable, Sendable, CustomStringConvertible {
    public let name: String
    let bytes: [UInt8]

    /// Hops after which a message is dropped: far more than any tree of sites needs, few enough
    /// that a loop of misconfigured links ends at once.
    static let maxHops: UInt32 = 8

    /// A site name, or `nil` when `name` is empty, longer than 64 bytes, or has other characters.
    public init?(_ name: String) {
        let bytes = Array(name.utf8)
        guard (1...64).contains(bytes.count), bytes.allSatisfy(Self.allowed) else { return nil }
        self.name = name
        self.bytes = bytes
    }

    /// A fresh name for a broker that was given none: `site-` and 12 random hexadecimal digits.
    static func random() -> SiteName {
        SiteName("site-" + Topic.newSnapshotToken().prefix(12))!
    }

    public var description: String { name }

    /// Digits of a snapshot token that name the site (``snapshotTokenMark``).
    static let snapshotTokenMarkLength = 16

    /// A snapshot token for this site's broker to ask upstream with: still 32 hexadecimal digits
    /// (wire.proto's snapshot topic), the first 16 the site's ``snapshotTokenMark``, the rest random.
    /// The upstream answers it without the site's own activities, which it has already: an
    /// upstream's subscriptions do not say who sent them, the token does.
    ///
    /// - Parameter random: Where the random part comes from (a random token; the simulator's are
    ///   drawn from its seed).
    func snapshotToken(random: String = Topic.newSnapshotToken()) -> String {
        snapshotTokenMark + random.prefix(Topic.snapshotTokenLength - Self.snapshotTokenMarkLength)
    }

    /// 16 hexadecimal digits of the name's FNV-1a hash (the same in every process and build, as a
    /// mark on the wire must be). A node whose random token began so by chance (1 in 2⁶⁴) would
    /// only miss that site's activities in its snapshot.
    var snapshotTokenMark: String { Self.snapshotTokenMark(of: bytes) }

    /// The mark of a site's name as bytes (a hub reads its sites' names so).
    static func snapshotTokenMark(of name: some Sequence<UInt8>) -> String {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in name { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        let digits = String(hash, radix: 16)
        return String(repeating: "0", count: snapshotTokenMarkLength - digits.count) + digits
    }

    private static func allowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            true
        default:
            false
        }
    }
}

/// A ``HandoffWire/WireSiteHop`` as a frame, and back.
extension WireSiteHop {
    init(hops: UInt32, origin: String, via: SiteName) {
        self.init()
        self.hops = hops
        self.origin = origin
        self.via = via.name
    }

    var frame: Frame { Frame((try? serializedBytes() as [UInt8]) ?? []) }

    /// The hop a frame carries, or `nil` when it is not one (or names no origin or sender).
    init?(frame: Frame) {
        guard frame.count <= 512, let hop = frame.withUnsafeBytes({ try? WireSiteHop(serializedBytes: Array($0)) }),
              !hop.origin.isEmpty, !hop.via.isEmpty else { return nil }
        self = hop
    }

    /// The same message, one link further: sent on by `site`.
    func onward(by site: SiteName) -> WireSiteHop {
        WireSiteHop(hops: hops + 1, origin: origin, via: site)
    }
}
