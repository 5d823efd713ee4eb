import Foundation
import ZeroMQ

/// The CURVE key a secure broker's message came with: its connection's "User-Id" (set by ZAP, the
/// key as Z85 text), decoded once for each run of messages from one connection. Consecutive
/// messages mostly come on one connection; making a `String` of the text and decoding it for every
/// message was about 4 % of a secure broker's thread in `handoff-bench broker-capacity --curve`.
struct ConnectionKeyReader {
    private var lastUserID: [UInt8] = []
    private var lastKey: [UInt8] = []

    /// The key of a "User-Id" property (`nil`: none, an empty key).
    mutating func key(ofUserID text: UnsafePointer<CChar>?) -> [UInt8] {
        guard let text else { return [] }
        let userID = UnsafeRawBufferPointer(start: text, count: strlen(text))
        if lastUserID.withUnsafeBytes({ sameBytes($0, userID) }) { return lastKey }
        lastKey = (try? CurveKey(z85: String(cString: text)).bytes) ?? []
        lastUserID = Array(userID)
        return lastKey
    }
}
