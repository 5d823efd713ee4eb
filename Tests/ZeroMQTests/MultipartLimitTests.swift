import Testing
import ZeroMQ
import HandoffTestSupport

@Suite("Multipart limits", .exclusive)
struct MultipartLimitTests {
    @Test("a message over the frame limit is dropped whole, and the next one is read as usual")
    func asyncLimit() async throws {
        let context = try Context()
        let (sender, receiver) = (try context.socket(.pair), try context.socket(.pair))
        try receiver.bind("inproc://multipart-limit")
        try sender.connect("inproc://multipart-limit")
        for index in 0..<1_000 { try await sender.send([UInt8(index % 256)], more: index < 999) }
        try await sender.send(Array("a".utf8), more: true)
        try await sender.send(Array("b".utf8))
        #expect(try await receiver.receiveMultipart(maxFrames: 3) == nil)
        let next = try #require(try await receiver.receiveMultipart(maxFrames: 3))
        #expect(next.map(\.string) == ["a", "b"])
    }
}
