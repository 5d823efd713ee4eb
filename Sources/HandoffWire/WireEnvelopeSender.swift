import Foundation

/// A node as the sender of its envelopes (`Envelope.sender`, wire.proto), encoded once: a node
/// names itself in every message it sends, and writing its `NodeRef` anew (four strings and a
/// nested length, through the writer's closures) was a tenth of the CPU of encoding a continue's
/// reply or request.
public struct WireEnvelopeSender: Sendable {
    public let node: WireNodeRef
    /// The `NodeRef`'s encoding (its fields, no tag or length); `nil` when it holds fields this
    /// build does not know, which SwiftProtobuf writes.
    let encoded: [UInt8]?

    public init(_ node: WireNodeRef) {
        self.node = node
        var writer = ProtobufWriter(capacity: 128)
        encoded = (try? node.write(to: &writer)) != nil ? writer.bytes : nil
    }
}
