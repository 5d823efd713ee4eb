import Testing
@testable import Handoff

@Suite("Sender check (no sockets)")
struct SenderCheckTests {
    let alice: [UInt8] = Array(repeating: 1, count: 32)
    let mallory: [UInt8] = Array(repeating: 2, count: 32)

    func claim(sender: String = "a", key: [UInt8], origin: String? = "a", originKey: [UInt8]?) -> BusClaim {
        BusClaim(senderID: sender, senderKey: key, activityID: origin == nil ? nil : "x", originID: origin, originKey: originKey)
    }

    @Test("without CURVE nothing can be checked")
    func insecure() {
        #expect(SenderCheck.forgery(claim(key: mallory, originKey: alice), connectionKey: nil, ownerKey: alice) == nil)
    }

    @Test("a member speaking in its own name about its own activity passes")
    func honest() {
        #expect(SenderCheck.forgery(claim(key: alice, originKey: alice), connectionKey: alice, ownerKey: alice) == nil)
        #expect(SenderCheck.forgery(claim(key: alice, originKey: alice), connectionKey: alice, ownerKey: nil) == nil)
        #expect(SenderCheck.forgery(claim(key: alice, origin: nil, originKey: nil), connectionKey: alice, ownerKey: nil) == nil)
    }

    @Test("another key as sender, another node as origin, or another key's activity is forged")
    func forged() {
        #expect(SenderCheck.forgery(claim(key: alice, originKey: alice), connectionKey: mallory, ownerKey: alice) == "names another key as its sender")
        #expect(SenderCheck.forgery(claim(key: [], originKey: []), connectionKey: mallory, ownerKey: nil) == "names no key as its sender")
        #expect(SenderCheck.forgery(claim(sender: "m", key: mallory, origin: "a", originKey: mallory), connectionKey: mallory, ownerKey: nil) == "speaks for node a")
        #expect(SenderCheck.forgery(claim(key: mallory, originKey: alice), connectionKey: mallory, ownerKey: nil) == "speaks for node a")
        #expect(SenderCheck.forgery(claim(key: mallory, originKey: mallory), connectionKey: mallory, ownerKey: alice) == "is about activity x, which belongs to another key")
    }
}
