import HandoffWire
import ZeroMQ

extension Frame {
    /// The envelope the frame holds, decoded where libzmq received it: a `Data` copy of its bytes
    /// first cost an allocation and a copy of every continue request and reply.
    func envelope() throws(WireDecodingError) -> WireEnvelope {
        try withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws(WireDecodingError) in try WireEnvelope.decode(bytes) }
    }
}
