import Foundation
import HandoffWire

/// The topics of tracing (wire.proto, "Tracing"): a tracer's request, as a subscription the
/// origin's publisher hears, and the hops, published under the trace's own topic.
extension Topic {
    /// Each party's ``WireTraceHop``: `T:` + the trace id.
    static let tracePrefix = "T:"
    /// A tracer's request: `X:` + origin node id + `/` + trace id + `/` + activity id.
    static let traceRequestPrefix = "X:"
    static let traceRequestPrefixBytes = Array(traceRequestPrefix.utf8)

    static func trace(_ traceID: String) -> [UInt8] { Array((tracePrefix + traceID).utf8) }
}

/// A tracer's request that `origin` advertise `activityID` once more, traced as `traceID`.
public struct TraceRequest: Equatable, Sendable {
    public var origin: String
    public var traceID: String
    public var activityID: String

    public init(origin: String, traceID: String, activityID: String) {
        self.origin = origin
        self.traceID = traceID
        self.activityID = activityID
    }

    /// A new trace id: 32 lowercase hexadecimal digits, as a snapshot token.
    public static func newTraceID() -> String { Topic.newSnapshotToken() }

    /// Whether `text` is a trace id as the contract has it: 32 lowercase hexadecimal digits
    /// (ASCII: `isHexDigit` also takes capitals and full-width digits).
    static func isTraceID(_ text: some StringProtocol) -> Bool {
        text.utf8.count == Topic.snapshotTokenLength && text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }

    /// The subscription that asks for it.
    public var topic: String { Topic.traceRequestPrefix + origin + "/" + traceID + "/" + activityID }

    /// The topic its hops come under.
    public var hopsTopic: String { Topic.tracePrefix + traceID }

    /// The request a subscription's topic (after its 1 or 0 byte) makes of the node `nodeID`, or
    /// `nil` when it is none (or one for another node). A node id holds no `/`; the trace id is
    /// 32 hexadecimal digits; the activity id is the rest.
    init?(topic: some Collection<UInt8>, nodeID: String) {
        let text = String(decoding: topic, as: UTF8.self)
        let prefix = Topic.traceRequestPrefix + nodeID + "/"
        guard text.hasPrefix(prefix) else { return nil }
        let rest = text.dropFirst(prefix.count)
        let traceID = rest.prefix(Topic.snapshotTokenLength)
        guard Self.isTraceID(traceID), rest.dropFirst(Topic.snapshotTokenLength).first == "/" else { return nil }
        let activityID = rest.dropFirst(Topic.snapshotTokenLength + 1)
        guard !activityID.isEmpty, activityID.utf8.count <= WireLimits.maxActivityID else { return nil }
        self.init(origin: nodeID, traceID: String(traceID), activityID: String(activityID))
    }
}

extension WireTraceHop {
    /// A hop of `kind` for the traced message, now.
    static func hop(_ kind: Kind, traceID: String, activityID: String, detail: String = "", at date: Date = Date()) -> WireTraceHop {
        var hop = WireTraceHop()
        hop.traceID = traceID
        hop.kind = kind
        hop.activityID = activityID
        hop.at = WireTimestamp(date)
        hop.detail = detail
        return hop
    }
}

/// How many tracers' requests a node answers: at most ``perSecond`` a second, so that a member
/// subscribing to "X:" topics in a loop cannot make a node flood the bus with advertisements.
struct TraceRequestLimit {
    static let perSecond = 10
    private var windowStart: ContinuousClock.Instant?
    private var answered = 0

    mutating func allow(now: ContinuousClock.Instant) -> Bool {
        if let start = windowStart, now - start < .seconds(1) {
            guard answered < Self.perSecond else { return false }
        } else {
            windowStart = now
            answered = 0
        }
        answered += 1
        return true
    }
}
