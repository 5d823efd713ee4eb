import Foundation
import HandoffWire
import SwiftProtobuf
import Testing

@testable import Handoff

/// stream.proto's checksum rules on the machine alone: the algorithm a writer's open announces is
/// the one its end is verified in.
extension StreamPairTests {
    @Test("reading: an end with no checksum, or in an algorithm other than the one the writer's open announced (SHA-256 after none, read as CRC-32C), is held to its length only, and says so")
    func endNotVerified() {
        var reader = pair(continuer: true, direction: .originToContinuer)
        var end = WireStreamEnd()
        end.checksumAlgorithm = .sha256
        end.checksum = Data(count: 32)
        let actions = reader.endArrived(end, now: start)
        #expect(actions.contains { if case .deliverEnd(0, nil) = $0 { true } else { false } })
        #expect(actions.contains { if case .record(.endNotVerified(.sha256, .crc32c, total: 0)) = $0 { true } else { false } })
        var unchecked = pair(continuer: true, direction: .originToContinuer)
        let none = unchecked.endArrived(WireStreamEnd(), now: start)
        #expect(none.contains { if case .record(.endNotVerified(.unspecified, .crc32c, total: 0)) = $0 { true } else { false } })
    }

    @Test("reading, verified ends required: an end with no checksum or in another algorithm than announced fails the pair with streamChecksumMismatch, tells the writer, and is still counted; an end in the announced algorithm is delivered")
    func verifiedEndRequired() {
        var unannounced = WireStreamEnd()
        unannounced.checksumAlgorithm = .sha256
        unannounced.checksum = Data(count: 32)
        for end in [unannounced, WireStreamEnd()] {
            var reader = pair(continuer: true, direction: .originToContinuer)
            reader.requiresVerifiedEnd = true
            let actions = reader.endArrived(end, now: start)
            #expect(!actions.contains { if case .deliverEnd = $0 { true } else { false } }, "\(actions)")
            #expect(actions.contains { if case .record(.endNotVerified) = $0 { true } else { false } })
            #expect(actions.contains { if case .send(.error(let error), _) = $0 { error.code == .streamChecksumMismatch } else { false } })
            #expect(reader.failure?.code == .streamChecksumMismatch)
        }
        var reader = pair(continuer: true, direction: .originToContinuer)
        reader.requiresVerifiedEnd = true
        var honest = WireStreamEnd()
        honest.checksumAlgorithm = .crc32C
        honest.checksum = Data(count: 4)
        let actions = reader.endArrived(honest, now: start)
        #expect(actions.contains { if case .deliverEnd(0, .some) = $0 { true } else { false } })
        #expect(reader.failure == nil)
    }

    @Test("reading, verified ends required: a writer that announces an algorithm this node does not know is refused as the pair opens (either side), and told; a known one, or one on a direction this side does not read, opens")
    func unverifiableWriterRefusedAtOpen() {
        let unknown = WireChecksumAlgorithm.UNRECOGNIZED(9)
        func refused(_ actions: [StreamPair.Action]) -> Bool {
            actions.contains { if case .send(.error(let error), _) = $0 { error.code == .streamChecksumMismatch } else { false } }
                && actions.contains { if case .failed(let error) = $0 { error.code == .streamChecksumMismatch } else { false } }
        }
        // The originator, from the continuing node's open…
        var origin = pair(continuer: false, direction: .continuerToOrigin)
        origin.requiresVerifiedEnd = true
        let accepted = origin.accept(WireStreamOpen.with { $0.direction = .continuerToOrigin; $0.checksumAlgorithm = unknown }, answer: WireStreamOpen(), now: start)
        #expect(refused(accepted) && !accepted.contains { if case .send(.open, _) = $0 { true } else { false } }, "\(accepted)")
        // …the continuing side, from the originator's answer.
        var reader = pair(continuer: true, direction: .originToContinuer)
        reader.requiresVerifiedEnd = true
        _ = reader.open(WireStreamOpen.with { $0.direction = .originToContinuer }, now: start, answerWithin: .seconds(2))
        let answered = reader.received(.open(WireStreamOpen.with { $0.direction = .originToContinuer; $0.window = 4; $0.checksumAlgorithm = unknown }), now: start)
        #expect(refused(answered) && !answered.contains { if case .opened = $0 { true } else { false } }, "\(answered)")
        // A known algorithm opens; so does an unknown one on the direction this side only writes.
        var known = pair(continuer: false, direction: .continuerToOrigin)
        known.requiresVerifiedEnd = true
        let knownActions = known.accept(WireStreamOpen.with { $0.direction = .continuerToOrigin; $0.checksumAlgorithm = .xxh64 }, answer: WireStreamOpen(), now: start)
        var writer = pair(continuer: false, direction: .originToContinuer)
        writer.requiresVerifiedEnd = true
        let writerActions = writer.accept(WireStreamOpen.with { $0.direction = .originToContinuer; $0.checksumAlgorithm = unknown }, answer: WireStreamOpen(), now: start)
        #expect(!refused(knownActions) && known.failure == nil && !refused(writerActions) && writer.failure == nil)
    }

    @Test("reading: the algorithm the writer's open announces (XXH64, SHA-256) is the one its end is verified in; an open announcing none is read as CRC-32C")
    func announcedChecksum() {
        for (announced, algorithm) in [(WireChecksumAlgorithm.xxh64, StreamChecksum.xxh64), (.sha256, .sha256), (.unspecified, .crc32c), (.crc32C, .crc32c)] {
            // The continuing side learns it from the originator's answer…
            var reader = pair(continuer: true, direction: .originToContinuer)
            _ = reader.open(WireStreamOpen.with { $0.direction = .originToContinuer }, now: start, answerWithin: .seconds(2))
            _ = reader.received(.open(WireStreamOpen.with { $0.direction = .originToContinuer; $0.window = 4; $0.checksumAlgorithm = announced }), now: start)
            #expect(reader.peerChecksum == algorithm)
            var end = WireStreamEnd()
            end.checksumAlgorithm = algorithm.wire
            end.checksum = Data(repeating: 7, count: 3)
            let actions = reader.endArrived(end, now: start)
            #expect(actions.contains { if case .deliverEnd(0, let checksum) = $0 { checksum == StreamEndChecksum(algorithm: algorithm, value: end.checksum) } else { false } })
            #expect(!actions.contains { if case .record(.endNotVerified) = $0 { true } else { false } })
            // …the originator from the continuing node's open.
            var origin = pair(continuer: false, direction: .continuerToOrigin)
            _ = origin.accept(WireStreamOpen.with { $0.direction = .continuerToOrigin; $0.checksumAlgorithm = announced }, answer: WireStreamOpen(), now: start)
            #expect(origin.peerChecksum == algorithm)
        }
        // An algorithm this side does not know: nothing to compute, the end goes unverified.
        var reader = pair(continuer: false, direction: .continuerToOrigin)
        _ = reader.accept(WireStreamOpen.with { $0.direction = .continuerToOrigin; $0.checksumAlgorithm = .UNRECOGNIZED(9) }, answer: WireStreamOpen(), now: start)
        #expect(reader.peerChecksum == nil)
        let actions = reader.endArrived(WireStreamEnd.with { $0.checksumAlgorithm = .UNRECOGNIZED(9); $0.checksum = Data([1]) }, now: start)
        #expect(actions.contains { if case .deliverEnd(0, nil) = $0 { true } else { false } })
    }
}

/// What a pair does when its own node stops.
extension StreamPairTests {
    @Test("rule: when the node stops, a live pair fails here with notRunning and tells its peer peerLost at once (not left to wait out its resume window); a failed pair says nothing more")
    func nodeStopped() {
        for continuer in [true, false] {
            var stopping = pair(continuer: continuer)
            let actions = stopping.nodeStopped(node: "laptop", now: start + .seconds(1))
            guard case .error(let notice)? = sent(actions).first else {
                Issue.record("the peer was not told (continuer: \(continuer)): \(actions)")
                continue
            }
            #expect(notice.code == .peerLost && notice.message == "laptop shut down" && notice.details["activity_type"] == "org.handoff.test.bulk")
            #expect(failure(actions)?.code == .notRunning)
            #expect(stopping.failedAt == start + .seconds(1))
            #expect(stopping.nodeStopped(node: "laptop", now: start + .seconds(2)).isEmpty, "a failed pair told its peer again")
        }
    }
}
