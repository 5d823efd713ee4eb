import Foundation
import SwiftProtobuf
import Testing

@testable import HandoffWire

/// The table of strings that repeat on the bus: it hands out a string only for the very bytes it
/// was made of, stays bounded, and changes nothing the bus's decode answers.
@Suite("Repeated strings of the bus, kept and handed out again")
struct WireStringsTests {
    static func string(_ table: WireStrings, _ text: String) throws -> String {
        let bytes = Array(text.utf8)
        return try bytes.withUnsafeBytes { raw in
            try table.string(raw) { () throws(BinaryDecodingError) in
                guard let made = String(validating: raw, as: UTF8.self) else { throw .invalidUTF8 }
                return made
            }
        }
    }

    @Test("the same bytes again: the kept string, counted as found; a short string is never kept")
    func sameBytesFound() throws {
        let table = WireStrings()
        let id = "5C2E7A41-93B0-4D1B-8E2F-0A6C9D3B7E15"
        #expect(try Self.string(table, id) == id)
        #expect(table.hits == 0 && table.misses == 1)
        #expect(try Self.string(table, id) == id)
        #expect(table.hits == 1 && table.misses == 1)
        #expect(try Self.string(table, "short name") == "short name")
        #expect(table.hits == 1 && table.misses == 1, "strings under \(WireStrings.shortestKept) bytes are not looked up")
        let accented = "Zoë's MacBook Pro — études"
        #expect(try Self.string(table, accented) == accented)
        #expect(try Self.string(table, accented) == accented)
        #expect(table.hits == 2)
    }

    @Test("two strings of the same slot: each handed out only for its own bytes, the slot holding the last")
    func collidingSlotsNeverConfused() throws {
        let table = WireStrings()
        var random = SplitMix(seed: 0x5_7A1E)
        var bySlot: [Int: String] = [:]
        var pair: (String, String)?
        while pair == nil {
            let text = String((0..<20).map { _ in Character(UnicodeScalar(UInt8(97 + random.next() % 26))) })
            let slot = Array(text.utf8).withUnsafeBytes { WireStrings.slot($0.baseAddress!, count: $0.count) }
            if let other = bySlot[slot], other != text { pair = (other, text) }
            bySlot[slot] = text
        }
        let (first, second) = try #require(pair)
        #expect(try Self.string(table, first) == first)
        #expect(try Self.string(table, second) == second)
        #expect(try Self.string(table, first) == first)
        #expect(table.hits == 0 && table.misses == 3, "each replaced the other in their one slot")
        // Same length and same last eight bytes: the same slot, told apart by the comparison.
        let a = "aaaaaaaa-the-same-tail", b = "bbbbbbbb-the-same-tail"
        #expect(try Self.string(table, a) == a)
        #expect(try Self.string(table, b) == b)
    }

    @Test("a stream of never-repeating strings keeps the table at its slots: nothing grows")
    func boundedUnderFreshStrings() throws {
        let table = WireStrings()
        for index in 0..<10_000 {
            let text = "fresh-id-\(index)-\(UUID().uuidString)"
            #expect(try Self.string(table, text) == text)
        }
        #expect(table.hits == 0 && table.misses == 10_000)
        #expect(table.kept <= 64)
    }

    @Test("the bus's decode with a table answers exactly as without one, over random and damaged envelopes read twice")
    func decodeAgreesWithAndWithoutTable() throws {
        let table = WireStrings()
        var random = SplitMix(seed: 0x57_21A6)
        var compared = 0
        for _ in 0..<300 {
            let bytes: [UInt8] = try FastEnvelopeCodingTests.randomEnvelope(&random).serializedBytes()
            var inputs = [bytes, bytes]
            for _ in 0..<10 { inputs.append(SplitMix.damage(bytes, &random)) }
            for input in inputs {
                let plain = input.withUnsafeBytes { raw in Result { () throws(WireDecodingError) in try WireBusEnvelope.decode(raw) } }
                let kept = input.withUnsafeBytes { raw in
                    Result { () throws(WireDecodingError) in try WireBusEnvelope.decode(raw, strings: table) }
                }
                #expect(plain == kept, "bytes \(input)")
                compared += 1
            }
        }
        #expect(compared == 3_600)
        #expect(table.hits > 0, "the envelopes read twice found their strings")
    }
}

extension WireStringsTests {
    @Test("bytes that repeat (a CURVE key): the kept Data for the same bytes, a new one for others")
    func repeatedBytes() {
        let table = WireStrings()
        let key = (0..<32).map { UInt8($0) }, other = (0..<32).map { UInt8(255 - $0) }
        func data(_ bytes: [UInt8]) -> Data { bytes.withUnsafeBytes { table.data($0) } }
        #expect(data(key) == Data(key))
        #expect(data(key) == Data(key))
        #expect(table.hits == 1 && table.misses == 1)
        #expect(data(other) == Data(other))
        #expect(data(key) == Data(key))
        #expect(data([1, 2, 3]) == Data([1, 2, 3]), "short bytes are made, not kept")
        #expect(table.hits + table.misses == 4)
    }
}
