import Foundation
import HandoffWire
import Testing
@testable import Handoff

/// The continuing side's rules for a stream open on ``StreamOpenRequest``, with no socket.
@Suite("Stream open request: whether a pair may be opened, the open sent, an unanswered open (no I/O)")
struct StreamOpenRequestTests {
    @Test("rule: a pair may be opened for an activity with stream support, or for its document without it; never at maxStreams live pairs")
    func mayOpen() {
        #expect(throws: Never.self) { try StreamOpenRequest.check(supportsStreams: true, document: false, livePairs: 63, maxStreams: 64, activityType: "t") }
        #expect(throws: Never.self) { try StreamOpenRequest.check(supportsStreams: false, document: true, livePairs: 0, maxStreams: 64, activityType: "t") }
        do {
            try StreamOpenRequest.check(supportsStreams: false, document: false, livePairs: 0, maxStreams: 64, activityType: "t")
            Issue.record("a pair was opened for an activity without stream support")
        } catch {
            #expect(error.code == .streamsNotSupported && error.activityType == "t")
        }
        do {
            try StreamOpenRequest.check(supportsStreams: true, document: true, livePairs: 64, maxStreams: 64, activityType: "t")
            Issue.record("a pair was opened past maxStreams")
        } catch {
            #expect(error.code == .tooManyStreams && error.message.contains("64 stream pairs"))
        }
    }

    @Test("the open carries the halves wanted, this node's window, chunk size and checksum, and whether it asks for the document")
    func open() {
        let open = StreamOpenRequest.open(activityID: "a1", direction: .originToContinuer, window: 8, chunkSize: 65_536, checksum: .xxh64, document: true)
        #expect(open.activityID == "a1" && open.direction == .originToContinuer && open.window == 8 && open.chunkSize == 65_536)
        #expect(open.checksumAlgorithm == .xxh64 && open.document && open.resumeToken.isEmpty)
    }

    @Test("an open the originator does not answer in time fails with remoteApplicationTimedOut, naming the endpoint and the timeout")
    func unanswered() {
        let error = StreamOpenRequest.unanswered(endpoint: "tcp://192.0.2.7:4100", timeout: .seconds(5), activityType: "t")
        #expect(error.code == .remoteApplicationTimedOut && error.message.contains("tcp://192.0.2.7:4100") && error.message.contains("within \(Duration.seconds(5))"))
    }
}
