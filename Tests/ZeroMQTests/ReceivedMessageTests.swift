import Testing
import ZeroMQ

@Suite("A message received in place (ReceivedMessage)")
struct ReceivedMessageTests {
    /// A connected PAIR of sockets over inproc, unique to the test.
    private static func pair(_ name: String) throws -> (sender: Socket, receiver: Socket, context: Context) {
        let context = try Context()
        let (sender, receiver) = (try context.socket(.pair), try context.socket(.pair))
        try receiver.bind("inproc://received-\(name)")
        try sender.connect("inproc://received-\(name)")
        return (sender, receiver, context)
    }

    private static func strings(_ message: ReceivedMessage) -> [String] {
        (0..<message.count).map { index in message.withUnsafeBytes(ofFrame: index) { String(decoding: $0, as: UTF8.self) } }
    }

    @Test("takes each whole message into the same storage, one after another; false when none waits")
    func wholeMessagesInTurn() throws {
        let (sender, receiver, _) = try Self.pair("turns")
        let message = ReceivedMessage(capacity: 4)
        #expect(try !receiver.tryReceive(into: message))
        try sender.send(multipart: [Array("topic".utf8), Array(repeating: UInt8(7), count: 300)])
        try sender.send(Array("one".utf8))
        _ = try receiver.poll(.readable, timeout: .seconds(5))
        #expect(try receiver.tryReceive(into: message))
        #expect(message.count == 2 && !message.isOverlong)
        #expect(message.size(ofFrame: 1) == 300 && message.withUnsafeBytes(ofFrame: 1) { $0.allSatisfy { $0 == 7 } })
        #expect(message.joinedBytes().count == 305)
        let joined = message.joined()
        #expect(joined.header.count == 305 && joined.afterFirstFrame == Array(repeating: 7, count: 300))
        #expect(joined.firstFrameStarts(with: Array("top".utf8)) && !joined.firstFrameStarts(with: Array("topic!".utf8)))
        #expect(try receiver.tryReceive(into: message))
        #expect(Self.strings(message) == ["one"])
        #expect(try !receiver.tryReceive(into: message))
    }

    @Test("an awaited receive suspends until a whole message arrives, each into the same storage in turn")
    func awaitedReceive() async throws {
        let context = try Context()
        let receiver = try context.socket(.pair)
        try receiver.bind("inproc://received-awaited")
        let message = ReceivedMessage(capacity: 2)
        // The sender, a socket of its own task, sends once the receiver waits.
        let sending = Task {
            let sender = try context.socket(.pair)
            try sender.connect("inproc://received-awaited")
            try await Task.sleep(for: .milliseconds(50))
            for index in 0..<100 { try await sender.send(multipart: [Array("topic".utf8), Array("message \(index)".utf8)]) }
            try await Task.sleep(for: .milliseconds(50))  // (closing it at once could drop what is queued)
        }
        for index in 0..<100 {
            try await receiver.receive(into: message)
            #expect(Self.strings(message) == ["topic", "message \(index)"])
            message.release()
        }
        try await sending.value
        #expect(try !receiver.tryReceive(into: message))
    }

    @Test("a message longer than its capacity is read whole and marked overlong; the next is read as usual")
    func overlong() throws {
        let (sender, receiver, _) = try Self.pair("overlong")
        let message = ReceivedMessage(capacity: 2)
        try sender.send(multipart: (0..<5).map { [UInt8($0)] })
        try sender.send(multipart: [Array("a".utf8), Array("b".utf8)])
        _ = try receiver.poll(.readable, timeout: .seconds(5))
        #expect(try receiver.tryReceive(into: message))
        #expect(message.isOverlong && message.count == 2)
        #expect(try receiver.tryReceive(into: message))
        #expect(!message.isOverlong && Self.strings(message) == ["a", "b"])
    }

    @Test("its frames are sent on sharing their bytes, kept as Frames past the next receive, and let go of by release")
    func sendKeepRelease() throws {
        let (sender, receiver, _) = try Self.pair("send")
        let (forwarder, sink, _) = try Self.pair("send-on")
        let message = ReceivedMessage(capacity: 4)
        try sender.send(multipart: [Array("t".utf8), Array(repeating: UInt8(1), count: 1_000)])
        _ = try receiver.poll(.readable, timeout: .seconds(5))
        #expect(try receiver.tryReceive(into: message))
        let kept = message.frames()
        #expect(try forwarder.trySend(frame: 0, of: message, more: true))
        #expect(try forwarder.trySend(frame: 1, of: message))
        message.release()
        #expect(message.count == 0)
        try sender.send(Array("next".utf8))
        _ = try receiver.poll(.readable, timeout: .seconds(5))
        #expect(try receiver.tryReceive(into: message))
        #expect(kept.map(\.count) == [1, 1_000] && kept[1].bytes.allSatisfy { $0 == 1 })
        let forwarded = try sink.receiveMultipart()
        #expect(forwarded.map(\.count) == [1, 1_000] && forwarded[0].string == "t")
    }

    @Test("a frame handed over goes itself: the peer gets its bytes, a Frame kept before keeps them, the frame reads empty after; refused, it stays")
    func handOver() throws {
        let (sender, receiver, context) = try Self.pair("hand-over")
        let (forwarder, sink, _) = try Self.pair("hand-over-on")
        let message = ReceivedMessage(capacity: 4)
        try sender.send(multipart: [Array("t".utf8), Array(repeating: UInt8(2), count: 1_000)])
        _ = try receiver.poll(.readable, timeout: .seconds(5))
        #expect(try receiver.tryReceive(into: message))
        // A PAIR with no peer cannot queue it: the frame is not taken.
        let unconnected = try context.socket(.pair)
        #expect(try !unconnected.trySend(handingOver: 1, of: message))
        #expect(message.size(ofFrame: 1) == 1_000)
        let kept = message.frame(1)
        #expect(try forwarder.trySend(handingOver: 0, of: message, more: true))
        #expect(try forwarder.trySend(handingOver: 1, of: message))
        #expect(message.size(ofFrame: 0) == 0 && message.size(ofFrame: 1) == 0)
        message.release()
        let forwarded = try sink.receiveMultipart()
        #expect(forwarded.map(\.count) == [1, 1_000] && forwarded[0].string == "t" && forwarded[1].bytes.allSatisfy { $0 == 2 })
        #expect(kept.count == 1_000 && kept.bytes.allSatisfy { $0 == 2 })
    }

    @Test("frames joined in one allocation keep the first apart: the rest alone, the first matched by prefix, empty frames too")
    func joinedFrames() {
        let joined = [Frame(Array("A:org.x".utf8)), Frame([1, 2, 3])].joined()
        #expect(joined.afterFirstFrame == [1, 2, 3] && joined.header.firstFrameCount == 7)
        #expect(joined.firstFrameStarts(with: Array("A:org".utf8)) && joined.firstFrameStarts(with: Array("A:org.x".utf8)) && joined.firstFrameStarts(with: []))
        #expect(!joined.firstFrameStarts(with: Array("A:org.x1".utf8)) && !joined.firstFrameStarts(with: Array("A:z".utf8)))
        let bare = [Frame([]), Frame([9])].joined()
        #expect(bare.afterFirstFrame == [9] && bare.firstFrameStarts(with: []) && !bare.firstFrameStarts(with: [65]))
        #expect([Frame]().joined().header.count == 0)
    }
}
