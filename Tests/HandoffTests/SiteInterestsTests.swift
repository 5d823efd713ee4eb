import Testing
@testable import Handoff

/// What sites below a broker follow (SiteInterests), with no socket: the prefix index, the bounds,
/// and the binding of names to keys on a secure broker.
@Suite("Sites: what each site below follows (state, no sockets)")
struct SiteInterestsTests {
    private static func bytes(_ string: String) -> [UInt8] { Array(string.utf8) }

    private static func sites(_ interests: SiteInterests, _ topic: String, excluding excluded: String? = nil) -> Set<String> {
        let found = bytes(topic).withUnsafeBytes { interests.sites(following: $0, excluding: excluded.map(bytes)) }
        #expect(found.count == Set(found).count, "each site at most once")
        return Set(found.map { String(decoding: $0, as: UTF8.self) })
    }

    @Test("a message goes to each site that follows a prefix of its topic, once however many of its prefixes match; a prefix let go stops only its own matches")
    func prefixIndex() {
        var interests = SiteInterests()
        for (site, prefix) in [("a", "A:"), ("a", "A:org."), ("a", "A:org.test.type"), ("b", "A:org.test."), ("c", "P:"), ("d", "")] {
            #expect(interests.subscribe(site: Self.bytes(site), prefix: Self.bytes(prefix), key: nil, relay: false) == nil)
        }
        #expect(Self.sites(interests, "A:org.test.type") == ["a", "b", "d"])
        #expect(Self.sites(interests, "A:org.test.type", excluding: "a") == ["b", "d"])
        #expect(Self.sites(interests, "P:node-1") == ["c", "d"])
        #expect(Self.sites(interests, "A") == ["d"])
        interests.unsubscribe(site: Self.bytes("a"), prefix: Self.bytes("A:"), key: nil)
        interests.unsubscribe(site: Self.bytes("a"), prefix: Self.bytes("A:org."), key: nil)
        #expect(Self.sites(interests, "A:com.other") == ["d"])
        #expect(Self.sites(interests, "A:org.test.type") == ["a", "b", "d"])
        interests.unsubscribe(site: Self.bytes("d"), prefix: [], key: nil)
        interests.unsubscribe(site: Self.bytes("a"), prefix: Self.bytes("A:org.test.type"), key: nil)
        #expect(Self.sites(interests, "A:org.test.type") == ["b"])
        #expect(interests.siteCount == 2)
        // Longer than any topic: it could match nothing.
        let long = [UInt8](repeating: UInt8(ascii: "x"), count: SiteInterests.maxPrefixLength + 1)
        #expect(interests.subscribe(site: Self.bytes("b"), prefix: long, key: nil, relay: false) == .prefixTooLong)
        #expect(interests.prefixes(of: Self.bytes("b")) == [Self.bytes("A:org.test.")])
        // Nothing is published to a site under a request's, a snapshot's or a site topic's prefix.
        for prefix in ["R:node-1", "R:*token", "X:n1/", "S:", "L:other|A:"] {
            #expect(interests.subscribe(site: Self.bytes("b"), prefix: Self.bytes(prefix), key: nil, relay: false) == .notBusTopic, "\(prefix)")
        }
    }

    @Test("on a secure broker a key speaks for at most 8 names (a relay's for any), not for another key's, nor withdraws under one; a relay takes a name from any other key, and what was followed under it goes; a name let go is free")
    func namesBoundToKeys() {
        var interests = SiteInterests()
        let (member, other, relay) = (Self.bytes("member-key"), Self.bytes("other-key"), Self.bytes("relay-key"))
        for index in 0..<SiteInterests.maxNamesPerKey {
            #expect(interests.subscribe(site: Self.bytes("fake\(index)"), prefix: [], key: member, relay: false) == nil)
        }
        // More prefixes under a name it holds are its own; a ninth name is not.
        #expect(interests.subscribe(site: Self.bytes("fake0"), prefix: Self.bytes("P:"), key: member, relay: false) == nil)
        #expect(interests.subscribe(site: Self.bytes("fake8"), prefix: [], key: member, relay: false) == .tooManyNames)
        // Another key may not follow under the member's name, nor a relay's; the member not under the relay's.
        #expect(interests.subscribe(site: Self.bytes("fake1"), prefix: Self.bytes("A:"), key: other, relay: false) == .nameHeld)
        #expect(interests.subscribe(site: Self.bytes("real"), prefix: Self.bytes("A:org."), key: relay, relay: true) == nil)
        #expect(interests.subscribe(site: Self.bytes("real"), prefix: [], key: other, relay: false) == .nameHeld)
        // A relay takes fake0 from the member: the member's prefixes under it are gone.
        #expect(interests.subscribe(site: Self.bytes("fake0"), prefix: Self.bytes("A:org."), key: relay, relay: true) == nil)
        #expect(interests.prefixes(of: Self.bytes("fake0")) == [Self.bytes("A:org.")])
        #expect(Self.sites(interests, "P:node") == Set((1..<8).map { "fake\($0)" }))
        // ...and the member's key speaks for seven names now: room for one more.
        #expect(interests.subscribe(site: Self.bytes("fake8"), prefix: [], key: member, relay: false) == nil)
        // A name whose last prefix is let go is free for any key.
        interests.unsubscribe(site: Self.bytes("fake1"), prefix: [], key: nil)
        #expect(interests.subscribe(site: Self.bytes("fake1"), prefix: [], key: other, relay: false) == nil)
        // A withdrawal under a name carrying another key than its owner's is ignored; libzmq's
        // own (no key) and the owner's are taken.
        let byMember = interests.unsubscribe(site: Self.bytes("real"), prefix: Self.bytes("A:org."), key: member)
        #expect(!byMember)
        #expect(interests.prefixes(of: Self.bytes("real")) == [Self.bytes("A:org.")])
        // A relay takes a name from another relay too (a site broker restarted with a new key),
        // and speaks for any number of names.
        #expect(interests.subscribe(site: Self.bytes("real"), prefix: Self.bytes("P:"), key: Self.bytes("relay-2"), relay: true) == nil)
        #expect(interests.prefixes(of: Self.bytes("real")) == [Self.bytes("P:")])
        for index in 0..<(SiteInterests.maxNamesPerKey + 2) {
            #expect(interests.subscribe(site: Self.bytes("relayed\(index)"), prefix: [], key: Self.bytes("relay-2"), relay: true) == nil)
        }
        let byLibzmq = interests.unsubscribe(site: Self.bytes("real"), prefix: Self.bytes("P:"), key: nil)
        #expect(byLibzmq)
        #expect(interests.prefixes(of: Self.bytes("real")).isEmpty)
        // An open broker binds nothing.
        var open = SiteInterests()
        for index in 0..<(SiteInterests.maxNamesPerKey + 4) {
            #expect(open.subscribe(site: Self.bytes("s\(index)"), prefix: [], key: nil, relay: false) == nil)
        }
    }
}
