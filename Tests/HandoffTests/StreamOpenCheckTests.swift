import Foundation
import HandoffWire
import Testing
@testable import Handoff

/// The originator's rules for a stream open on ``StreamOpenCheck``, with no socket: which opens
/// are refused and why, when evicting a stalled pair may let one in, the limits' refusals, and the
/// answer that accepts one.
@Suite("Stream open check: accept or refuse an open, the limits' refusals, the answer (no I/O)")
struct StreamOpenCheckTests {
    final class Receiver: UserActivityDelegate {}

    let receiver = Receiver()

    func open(_ activity: UserActivity, document: Bool = false, direction: WireStreamDirection = .originToContinuer) -> WireStreamOpen {
        var open = WireStreamOpen()
        open.activityID = activity.id
        open.direction = direction
        open.document = document
        return open
    }

    func streaming(_ type: String = "org.test.list") throws -> UserActivity {
        let activity = try UserActivity(activityType: type)
        activity.supportsContinuationStreams = true
        activity.delegate = receiver
        return activity
    }

    func refusal(_ check: StreamOpenCheck) -> HandoffError? {
        if case .refuse(let error) = check { error } else { nil }
    }

    @Test("rule: an open of a current activity that supports streams and has a delegate is accepted, for the delegate; either way")
    func accepted() throws {
        let activity = try streaming()
        let all = CurrentActivities.holding(activity)
        #expect(StreamOpenCheck.check(open(activity), in: all, node: "n") == .accept(activity, document: nil))
        #expect(StreamOpenCheck.check(open(activity, direction: .continuerToOrigin), in: all, node: "n") == .accept(activity, document: nil))
    }

    @Test("rule: an open is refused with its precise error: an id past the contract's length, no such current activity, no stream support, no delegate, an unknown direction")
    func refused() throws {
        let activity = try streaming()
        let plain = try UserActivity(activityType: "org.test.plain")
        let undelegated = try UserActivity(activityType: "org.test.undelegated")
        undelegated.supportsContinuationStreams = true
        let all = CurrentActivities.holding(activity, plain, undelegated)
        var long = open(activity)
        long.activityID = String(repeating: "x", count: WireLimits.maxActivityID + 1)
        let oversized = refusal(StreamOpenCheck.check(long, in: all, node: "n"))
        #expect(oversized?.code == .malformedMessage && oversized?.message.contains("over the contract's limits") == true, "\(String(describing: oversized))")
        let gone = refusal(StreamOpenCheck.check(open(try UserActivity(activityType: "org.test.gone")), in: all, node: "n"))
        #expect(gone?.code == .activityNotFound && gone?.message.hasPrefix("n has no current activity") == true)
        let unsupported = refusal(StreamOpenCheck.check(open(plain), in: all, node: "n"))
        #expect(unsupported?.code == .streamsNotSupported && unsupported?.message.contains("does not support") == true)
        #expect(unsupported?.activityType == "org.test.plain")
        let nobody = refusal(StreamOpenCheck.check(open(undelegated), in: all, node: "n"))
        #expect(nobody?.code == .streamsNotSupported && nobody?.message.contains("no delegate") == true)
        let unknown = refusal(StreamOpenCheck.check(open(activity, direction: .UNRECOGNIZED(7)), in: all, node: "n"))
        #expect(unknown?.code == .malformedMessage && unknown?.message.contains("7") == true)
    }

    @Test("rule: a document open is accepted for a local file sent to the continuer, also of an activity without stream support or delegate; refused with no document, a remote URL, or the other direction")
    func documents() throws {
        let file = URL(fileURLWithPath: "/tmp/handoff-stream-open-check.txt")
        let document = DocumentReference(url: file, version: 3, sha256: Array(repeating: 1, count: 32), size: 42)
        let withDocument = try UserActivity(activityType: "org.test.doc")
        withDocument.document = document
        let remote = try UserActivity(activityType: "org.test.remote")
        remote.document = DocumentReference(url: try #require(URL(string: "https://example.com/doc")), version: 1, sha256: Array(repeating: 1, count: 32), size: 1)
        let without = try streaming()
        let all = CurrentActivities.holding(withDocument, remote, without)
        #expect(StreamOpenCheck.check(open(withDocument, document: true), in: all, node: "n") == .accept(withDocument, document: document))
        let backwards = refusal(StreamOpenCheck.check(open(withDocument, document: true, direction: .continuerToOrigin), in: all, node: "n"))
        #expect(backwards?.code == .streamsNotSupported && backwards?.message.contains("ORIGIN_TO_CONTINUER") == true)
        #expect(refusal(StreamOpenCheck.check(open(remote, document: true), in: all, node: "n"))?.code == .streamsNotSupported)
        let none = refusal(StreamOpenCheck.check(open(without, document: true), in: all, node: "n"))
        #expect(none?.code == .streamsNotSupported && none?.message.contains("no document") == true)
        // Not asked for the document: the activity's own streams rules hold (no support here).
        #expect(refusal(StreamOpenCheck.check(open(withDocument), in: all, node: "n"))?.code == .streamsNotSupported)
    }

    @Test("rule: evicting a stalled pair may admit an open only when the node is full and the peer is under its own limit")
    func eviction() {
        #expect(StreamOpenCheck.evictionMayAdmit(.nodeFull(open: 64, fromPeer: 3), maxStreamsPerPeer: 16))
        #expect(!StreamOpenCheck.evictionMayAdmit(.nodeFull(open: 64, fromPeer: 16), maxStreamsPerPeer: 16))
        #expect(!StreamOpenCheck.evictionMayAdmit(.peerFull(fromPeer: 16), maxStreamsPerPeer: 16))
        #expect(!StreamOpenCheck.evictionMayAdmit(.admitted, maxStreamsPerPeer: 16))
    }

    @Test("rule: a limit refuses with tooManyStreams, naming its scope (node or peer) and size in the details; an admitted open is not refused")
    func limits() throws {
        #expect(StreamOpenCheck.overLimit(.admitted, node: "n", owner: "p", activityType: "t", maxStreams: 64, maxStreamsPerPeer: 16) == nil)
        let node = try #require(StreamOpenCheck.overLimit(.nodeFull(open: 64, fromPeer: 2), node: "n", owner: "p", activityType: "t", maxStreams: 64, maxStreamsPerPeer: 16))
        #expect(node.wire.code == .tooManyStreams && node.wire.details["scope"] == "node" && node.wire.details["limit"] == "64")
        #expect(node.wire.details["activity_type"] == "t" && node.logged == "the node has 64 pairs open")
        let peer = try #require(StreamOpenCheck.overLimit(.peerFull(fromPeer: 16), node: "n", owner: "p", activityType: "t", maxStreams: 64, maxStreamsPerPeer: 16))
        #expect(peer.wire.details["scope"] == "peer" && peer.wire.details["limit"] == "16" && peer.logged == "peer p has 16 pairs open")
        #expect(HandoffError(wire: peer.wire).details["scope"] == "peer")
    }

    @Test("the answer carries the originator's window, chunk size, checksum and resume token, and a document's length")
    func answer() throws {
        let activity = try streaming()
        let document = DocumentReference(url: URL(fileURLWithPath: "/tmp/d"), version: 1, sha256: Array(repeating: 0, count: 32), size: 1_234)
        let token = Data(repeating: 9, count: 16)
        let answer = StreamOpenCheck.answer(open(activity, document: true), document: document, window: 8, chunkSize: 65_536, checksum: .crc32C, resumeToken: token)
        #expect(answer.activityID == activity.id && answer.direction == .originToContinuer && answer.document)
        #expect(answer.window == 8 && answer.chunkSize == 65_536 && answer.checksumAlgorithm == .crc32C && answer.resumeToken == token)
        #expect(answer.expectedLength == 1_234)
        #expect(StreamOpenCheck.answer(open(activity), document: nil, window: 8, chunkSize: 1, checksum: .crc32C, resumeToken: token).expectedLength == 0)
    }
}
