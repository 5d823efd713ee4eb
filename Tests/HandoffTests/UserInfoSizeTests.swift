import Foundation
import HandoffWire
import SwiftProtobuf
import Testing

@testable import Handoff

/// The userInfo size limit is counted by hand from the values (`encodedSize(ofUserInfo:)`); it
/// must be exactly what the encoder writes, or a limit would pass what the wire then carries over it.
@Suite("userInfo's encoded size, counted without encoding")
struct UserInfoSizeTests {
    /// What SwiftProtobuf writes for an Activity holding only this userInfo.
    func encoded(_ userInfo: [String: UserInfoValue]) throws -> Int {
        var activity = WireActivity()
        activity.userInfo = wireUserInfo(userInfo)
        return try (activity.serializedBytes() as [UInt8]).count
    }

    @Test("the count equals the encoder's for defaults, extremes and lengths past one varint byte")
    func edges() throws {
        let long = String(repeating: "é", count: 200)  // 400 bytes: a two-byte length
        let cases: [[String: UserInfoValue]] = [
            [:],
            ["": ""],
            ["zero": 0, "false": false, "nothing": .double(0), "empty": .bytes(Data())],
            ["min": .int(.min), "max": .int(.max), "minus one": -1, "one": 1, "63": 63, "64": 64, "-65": -65],
            ["nan": .double(.nan), "inf": .double(-.infinity)],
            ["epoch": .date(Date(timeIntervalSince1970: 0)), "before": .date(Date(timeIntervalSince1970: -1.25)),
             "now": .date(Date()), "whole": .date(Date(timeIntervalSince1970: 1_700_000_000))],
            ["url": .url(URL(string: "https://example.org/a%20b?q=1#f")!)],
            ["long": .string(long), long: .bytes(Data(repeating: 7, count: 20_000))],
            ["list": [], "map": .map([:]), "nested": [["a": [1, "two", [3.0, false]]], .map(["": .list([])])]],
        ]
        for userInfo in cases {
            #expect(encodedSize(ofUserInfo: userInfo) == (try encoded(userInfo)), "\(userInfo)")
        }
    }

    @Test("the count equals the encoder's over 2,000 random userInfo dictionaries (seeded)")
    func random() throws {
        var random = SimulationRandom(seed: 36)
        for round in 0..<2_000 {
            var userInfo: [String: UserInfoValue] = [:]
            for index in 0..<Int.random(in: 0...6, using: &random) {
                userInfo["key \(index) \(String(repeating: "k", count: Int.random(in: 0...140, using: &random)))"] =
                    randomValue(depth: 0, using: &random)
            }
            #expect(encodedSize(ofUserInfo: userInfo) == (try encoded(userInfo)), "round \(round): \(userInfo)")
        }
    }

    func randomValue(depth: Int, using random: inout SimulationRandom) -> UserInfoValue {
        switch Int.random(in: 0...(depth < 3 ? 8 : 6), using: &random) {
        case 0: return .string(String(repeating: "s", count: Int.random(in: 0...300, using: &random)))
        case 1: return .int(Int64(bitPattern: random.next()) >> Int64.random(in: 0...63, using: &random))
        case 2: return .double(Double(bitPattern: random.next()))
        case 3: return .bool(Bool.random(using: &random))
        case 4: return .bytes(Data(repeating: 1, count: Int.random(in: 0...200, using: &random)))
        case 5: return .date(Date(timeIntervalSince1970: Double.random(in: -4e9...4e9, using: &random)))
        case 6: return .url(URL(string: "https://example.org/\(random.next())")!)
        case 7: return .list((0..<Int.random(in: 0...4, using: &random)).map { _ in randomValue(depth: depth + 1, using: &random) })
        default:
            var entries: [String: UserInfoValue] = [:]
            for index in 0..<Int.random(in: 0...4, using: &random) { entries["n\(index)"] = randomValue(depth: depth + 1, using: &random) }
            return .map(entries)
        }
    }
}
