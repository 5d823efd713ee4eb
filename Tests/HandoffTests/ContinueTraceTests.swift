import Foundation
import Handoff
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
import HandoffTestSupport

/// The originating side of a traced continue (wire.proto, "Tracing"), against a real broker: what
/// it reports on the bus, and what it answers untraced.
@Suite("Tracing a continue: what the originator reports", .exclusive)
struct ContinueTraceTests {
    /// The hops heard on "T:", by trace id.
    func hops(on socket: Socket, expecting expected: Int, within: Duration = .seconds(10)) async throws -> [String: [WireTraceHop]] {
        var heard: [String: [WireTraceHop]] = [:]
        // A second past the hops expected: hops past them are heard too, and fail the test that did not expect them.
        try await receiveMessages(socket, within: within, quiet: .seconds(1), until: { heard.values.reduce(0) { $0 + $1.count } >= expected }) { frames in
            guard frames.count == 2 else { return }
            if case .traceHop(let hop)? = try? WireEnvelope.decode(frames[1].data).body { heard[hop.traceID, default: []].append(hop) }
        }
        return heard
    }

    /// A broker of its own, and a subscriber there to every trace's hops: `body` gets the
    /// subscriber and the broker's frontend and backend.
    func withTracer(_ body: (Socket, String, String) async throws -> Void) async throws {
        let (broker, frontend, backend) = try await startBroker()
        let context = try Context()
        let tracer = try context.socket(.sub)
        defer { tracer.close() }
        try tracer.subscribe("T:")
        try tracer.connect(backend)
        try await body(tracer, frontend, backend)
        _ = broker
    }

    /// A node on a broker of its own, and a subscriber there to every trace's hops (in place before
    /// `body` runs).
    func withTracedOrigin(_ body: (Node, Socket) async throws -> Void) async throws {
        try await withTracer { tracer, frontend, backend in
            try await Node.withRunning(brokerConfiguration("origin", frontend: frontend, backend: backend)) { node in
                // The tracer's subscriptions reach the node through the broker: its presence, which
                // the tracer follows too until it arrives, shows that they have (a fixed wait need not
                // on a loaded machine).
                try await untilPresence(of: node.id, reaches: tracer)
                try await body(node, tracer)
            }
        }
    }

    @Test("a traced request is answered as any other and reported (received, answered with the version); a trace id that is not 32 hexadecimal digits, and traces past ten a second, are answered untraced")
    func originatorReports() async throws {
        try await withTracedOrigin { node, tracer in
            let activity = try UserActivity(activityType: "org.handoff.test.traced")
            activity.title = "traced"
            try await activity.becomeCurrent(on: node)
            let peer = try WirePeer(connectingTo: node.continuationEndpoint)
            var request = WireContinueRequest()
            request.activityID = activity.id
            request.activityType = activity.activityType
            let ids = (0..<12).map { _ in TraceRequest.newTraceID() }
            let sent = ContinuousClock.now
            for (index, id) in ids.enumerated() {
                try peer.send(.continueRequest(request), as: "tracer", correlationID: UInt64(index + 1), traceID: id)
            }
            try peer.send(.continueRequest(request), as: "tracer", correlationID: 100, traceID: "not-a-trace-id")
            // Every request is answered with the activity, traced or not.
            var answered = 0
            while let (envelope, _) = try await peer.receive(within: .seconds(10)) {
                if case .continueReply(let reply) = envelope.body, case .activity = reply.result { answered += 1 }
                if answered == 13 { break }
            }
            #expect(answered == 13)
            // The node's second of ten traces began as it took the first request, and every one was
            // taken before its answer came back: within a second of the first send, all twelve fell
            // in that second. A loaded machine can stretch them over two (the rule alone, with no
            // clock but the test's: TraceTests), where the eleventh and twelfth may rightly be traced.
            let oneSecond = ContinuousClock.now - sent < .seconds(1)
            let heard = try await hops(on: tracer, expecting: 20)  // ten traced, two hops each
            // Ten a second: the first ten ids are traced, each with both hops, in order.
            #expect((oneSecond ? heard.count == 10 : (10...12).contains(heard.count)) && ids.prefix(10).allSatisfy { heard[$0] != nil },
                    "\(heard.keys.sorted()) (all answered within a second: \(oneSecond))")
            for id in ids.prefix(10) {
                let kinds = heard[id]?.map(\.kind) ?? []
                #expect(kinds == [.continueReceived, .continueAnswered], "\(id): \(kinds)")
                #expect(heard[id]?.last?.detail.hasPrefix("the activity, version ") == true && heard[id]?.allSatisfy { $0.activityID == activity.id } == true)
                #expect(heard[id]?.first?.detail.contains("tracer") == true, "\(heard[id]?.first?.detail ?? "")")
            }
            #expect(heard["not-a-trace-id"] == nil)
        }
    }

    @Test("a traced request that is refused is reported with its error")
    func refusalReported() async throws {
        try await withTracedOrigin { node, tracer in
            let peer = try WirePeer(connectingTo: node.continuationEndpoint)
            var request = WireContinueRequest()
            request.activityID = "no-such-activity"
            request.activityType = "org.handoff.test.traced"
            let id = TraceRequest.newTraceID()
            try peer.send(.continueRequest(request), as: "tracer", correlationID: 1, traceID: id)
            let heard = try await hops(on: tracer, expecting: 2)
            let answered = try #require(heard[id]?.last, "\(heard)")
            #expect(answered.kind == .continueAnswered && answered.detail.hasPrefix("refused: activity not found"), "\(answered.detail)")
        }
    }

    @Test("a traced continue's streams are traced too: the originator reports the open it answered and the pair's end, complete with its bytes; a stream of an untraced continue is not reported")
    func streamsTraced() async throws {
        let peer = StreamPeer(sending: patternBytes(300_000, seed: 5))
        try await withTracer { tracer, frontend, backend in
            try await Node.withRunning(brokerConfiguration("origin", frontend: frontend, backend: backend)) { origin in
                try await Node.withRunning(brokerConfiguration("continuer", frontend: frontend, backend: backend)) { continuer in
                    let activity = try await currentStreamingActivity(on: origin, delegate: peer)
                    await continuer.setContinuationHandler(forType: activity.activityType) { _ in }
                    let found = try await discovered(activity.id, on: continuer)
                    let id = TraceRequest.newTraceID()
                    let traced = try #require(try await continuer.continueActivity(found, wantingStreams: true, traceID: id).restored)
                    let streams = try await continuer.openStreams(for: traced, direction: .fromOriginator)
                    #expect(try await streams.input.readAll() == peer.outgoing)
                    let untraced = try #require(try await continuer.continueActivity(found, wantingStreams: true).restored)
                    let other = try await continuer.openStreams(for: untraced, direction: .fromOriginator)
                    #expect(try await other.input.readAll() == peer.outgoing)
                    let heard = try await hops(on: tracer, expecting: 4)
                    #expect(heard.keys.sorted() == [id], "\(heard.keys.sorted())")
                    let kinds = heard[id]?.map(\.kind) ?? []
                    #expect(kinds == [.continueReceived, .continueAnswered, .streamOpened, .streamEnded], "\(kinds)")
                    let opened = heard[id]?.first { $0.kind == .streamOpened }?.detail ?? ""
                    #expect(opened.contains("from the originator only"), "\(opened)")
                    #expect(opened.contains("with continuer (\(continuer.id.prefix(8)))"), "named as the continue hops name it: \(opened)")
                    #expect(heard[id]?.last?.detail.hasPrefix("complete: 300000 bytes sent") == true, "\(heard[id]?.last?.detail ?? "")")
                    #expect(heard[id]?.allSatisfy { $0.activityID == activity.id } == true)
                }
            }
        }
    }

    @Test("a traced open that is refused is reported as its end, with the error; an activity id over the wire's limits is not repeated")
    func refusedOpenTraced() async throws {
        try await withTracedOrigin { node, tracer in
            let peer = try WirePeer(connectingTo: node.continuationEndpoint)
            var open = WireStreamOpen()
            open.activityID = "no-such-activity"
            open.window = 4
            var frame = WireStreamFrame()
            frame.streamID = 1
            frame.open = open
            let id = TraceRequest.newTraceID()
            try peer.send(.streamFrame(frame), as: "tracer", traceID: id)
            // An id over the wire's limits is refused, and not repeated on the bus.
            frame.open.activityID = String(repeating: "x", count: 10_000)
            frame.streamID = 2
            let oversized = TraceRequest.newTraceID()
            try peer.send(.streamFrame(frame), as: "tracer", traceID: oversized)
            let heard = try await hops(on: tracer, expecting: 2)
            let ended = try #require(heard[id]?.last, "\(heard)")
            #expect(heard[id]?.count == 1 && ended.kind == .streamEnded && ended.detail.hasPrefix("refused: activity not found"), "\(ended.detail)")
            let refused = try #require(heard[oversized]?.last, "\(heard.keys)")
            #expect(refused.activityID.isEmpty && refused.detail.hasPrefix("refused: malformed"), "\(refused.detail)")
        }
    }
}
