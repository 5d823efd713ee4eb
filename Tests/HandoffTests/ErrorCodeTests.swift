import HandoffWire
import Testing
@testable import Handoff

/// error.proto: "a receiver that sees a code it does not know treats it as ERROR_CODE_HANDOFF_FAILED";
/// a sender sends only codes it declares.
@Suite("Error codes on the wire: only declared ones sent, unknown ones read as handoff failed")
struct ErrorCodeTests {
    @Test("contract: an unknown code from a newer peer is read as handoffFailed (NSUserActivity's 4608), its number kept in details; a declared one as it is")
    func unknownCodeReadAsFailed() {
        var wire = WireError()
        wire.code = WireErrorCode(rawValue: 4_999)!
        wire.message = "something a newer release knows"
        let error = HandoffError(wire: wire)
        #expect(error.code == .handoffFailed)
        #expect(error.code.appleErrorCode == 4608)
        #expect(error.details["code"] == "4999")
        #expect(error.message == "something a newer release knows")
        wire.code = .streamTruncated
        #expect(HandoffError(wire: wire).code == .streamTruncated)
        #expect(HandoffError(wire: wire).details["code"] == nil)
    }

    @Test("contract: a local code (1000 and up: plugin failed, not running…) goes on the wire as handoffFailed, never as an undeclared number")
    func localCodeSentAsFailed() {
        for code in [HandoffError.Code.notRunning, .declined, .invalidatedLocally, .invalidConfiguration, .pluginRefused, .pluginFailed] {
            #expect(HandoffError(code, "local").wire.code == .handoffFailed, "\(code)")
        }
        #expect(HandoffError(.tooManyStreams, "declared").wire.code == .tooManyStreams)
    }
}
