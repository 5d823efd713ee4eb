import HandoffWire
import ZeroMQ

extension Frame {
    /// The envelope the frame holds, decoded where libzmq received it: a `Data` copy of its bytes
    /// first cost an allocation and a copy of every continue request and reply.
    func envelope() throws(WireDecodingError) -> WireEnvelope {
        try withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws(WireDecodingError) in try WireEnvelope.decode(bytes) }
    }

    /// What a continuing node's DEALER received: an activity reply's activity in plain values,
    /// anything else as the generated envelope (``WireReplyEnvelope``).
    func replyEnvelope(strings: WireStrings? = nil) throws(WireDecodingError) -> WireReplyEnvelope {
        try withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws(WireDecodingError) in try WireReplyEnvelope.decode(bytes, strings: strings) }
    }

    /// What the continuation ROUTER received: a continue request in its parts, anything else as
    /// the generated envelope (``WireServerEnvelope``).
    func serverEnvelope(strings: WireStrings? = nil) throws(WireDecodingError) -> WireServerEnvelope {
        try withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws(WireDecodingError) in try WireServerEnvelope.decode(bytes, strings: strings) }
    }
}
