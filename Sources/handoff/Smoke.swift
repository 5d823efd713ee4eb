import ArgumentParser
import Foundation
import HandoffWire
import SwiftProtobuf
import Synchronization
import ZeroMQ

/// `handoff smoke`: proves the foundation end to end on loopback — a broker (XSUB/XPUB proxy), an
/// advertisement over pub/sub, and a continuation over ROUTER/DEALER, all in protobuf envelopes.
struct Smoke: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the foundation: broker, advertisement over pub/sub, continuation over ROUTER/DEALER.")

    func run() async throws {
        let started = ContinuousClock.now
        func stamp(_ text: String) {
            print(String(format: "[%7.2f ms] ", milliseconds(ContinuousClock.now - started)) + text)
        }
        let version = ZeroMQLibrary.version
        stamp("libzmq \(version.major).\(version.minor).\(version.patch), CURVE \(ZeroMQLibrary.has("curve") ? "available" : "missing"), wire protocol v\(WireProtocol.version)")

        let context = try Context()
        let broker = try SmokeBroker.start(context: context)
        stamp("broker up: publishers → \(broker.frontend), subscribers ← \(broker.backend)")

        // Node A: publishes, and answers continuations on a ROUTER.
        let nodeA = node(id: UUID().uuidString, name: "node-a")
        let publisher = try context.socket(.pub)
        try publisher.connect(broker.frontend)
        let router = try context.socket(.router)
        try router.bind("tcp://127.0.0.1:*")
        let continueEndpoint = try router.lastEndpoint

        // Node B: subscribes to contacts activities and continues over a DEALER.
        let nodeB = node(id: UUID().uuidString, name: "node-b")
        let subscriber = try context.socket(.sub)
        try subscriber.subscribe("A:org.handoff.contacts.")
        try subscriber.connect(broker.backend)

        var activity = WireActivity()
        activity.activityID = UUID().uuidString
        activity.activityType = "org.handoff.contacts.edit-contact"
        activity.title = "Editing Ada Lovelace"
        activity.userInfo = [
            "firstName": value { $0.stringValue = "Ada" },
            "lastName": value { $0.stringValue = "Lovelace" },
            "draftRevision": value { $0.intValue = 3 },
        ]
        activity.origin = nodeA
        activity.version = 1

        var advertisement = WireAdvertisement()
        advertisement.activityID = activity.activityID
        advertisement.activityType = activity.activityType
        advertisement.title = activity.title
        advertisement.origin = nodeA
        advertisement.continueEndpoint = continueEndpoint
        advertisement.version = 1
        advertisement.leaseMs = 3000
        let topic = Array("A:\(activity.activityType)".utf8)
        let advertised: [UInt8] = try WireEnvelope(body: .advertisement(advertisement), sender: nodeA, sequence: 1).serializedBytes()

        // Publish until the subscription has crossed the broker (a new subscriber misses earlier sends).
        var received: WireAdvertisement?
        for _ in 0..<250 where received == nil {
            try await publisher.send(multipart: [topic, advertised])
            guard let frames = try await receiveMultipart(subscriber, timeout: Duration.milliseconds(20)) else { continue }
            let envelope = try WireEnvelope.decode(frames[1].data)
            if case .advertisement(let seen) = envelope.body { received = seen }
        }
        guard let received else { throw ValidationError("the advertisement never crossed the broker") }
        stamp("node-b discovered \"\(received.title)\" (\(received.activityType)) from \(received.origin.name), \(advertised.count + topic.count) bytes on the bus")

        let dealer = try context.socket(.dealer)
        try dealer.connect(received.continueEndpoint)
        var request = WireContinueRequest()
        request.activityID = received.activityID
        request.activityType = received.activityType
        let asked = ContinuousClock.now
        try await dealer.send(try WireEnvelope(body: .continueRequest(request), sender: nodeB, sequence: 1, correlationID: 7).serializedBytes() as [UInt8])

        let incoming = try await router.receiveMultipart()
        let question = try WireEnvelope.decode(incoming[1].data)
        guard case .continueRequest(let asking) = question.body, asking.activityID == activity.activityID else {
            throw ValidationError("node-a got an unexpected request")
        }
        var reply = WireContinueReply()
        reply.activity = activity
        try await router.send(multipart: [incoming[0].bytes, try WireEnvelope(body: .continueReply(reply), sender: nodeA, sequence: 2, correlationID: question.correlationID).serializedBytes() as [UInt8]])

        let answer = try WireEnvelope.decode(try await dealer.receive().data)
        guard answer.correlationID == 7, case .continueReply(let continued) = answer.body, case .activity(let full)? = continued.result else {
            throw ValidationError("node-b got an unexpected reply")
        }
        let roundTrip = ContinuousClock.now - asked
        let fields = full.userInfo.keys.sorted().map { "\($0)=\(full.userInfo[$0]!.kind.map { "\($0)" } ?? "?")" }
        stamp("node-b continued it from \(full.origin.name) in \(String(format: "%.2f", milliseconds(roundTrip))) ms: \(fields.joined(separator: ", "))")
        guard full == activity else { throw ValidationError("the continued activity differs from the original") }

        broker.stop()
        stamp("smoke check passed")
    }

    private func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }

    private func node(id: String, name: String) -> WireNodeRef {
        var node = WireNodeRef()
        node.nodeID = id
        node.name = name
        node.host = ProcessInfo.processInfo.hostName
        return node
    }

    private func value(_ build: (inout WireValue) -> Void) -> WireValue {
        var value = WireValue()
        build(&value)
        return value
    }

    private func receiveMultipart(_ socket: Socket, timeout: Duration) async throws -> [Frame]? {
        guard let first = try await socket.receive(timeout: timeout) else { return nil }
        var frames = [first]
        while frames.last!.hasMore { frames.append(try await socket.receive()) }
        return frames
    }
}

/// A plain XSUB/XPUB proxy on its own thread, stopped over an inproc control socket.
private struct SmokeBroker: Sendable {
    let frontend: String
    let backend: String
    let context: Context
    let control: String

    static func start(context: Context) throws -> SmokeBroker {
        let control = "inproc://smoke-broker-control"
        let endpoints = Mutex<Result<(String, String), ZMQError>?>(nil)
        let ready = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do throws(ZMQError) {
                let xsub = try context.socket(.xsub)
                let xpub = try context.socket(.xpub)
                let controlSocket = try context.socket(.pair)
                try xsub.bind("tcp://127.0.0.1:*")
                try xpub.bind("tcp://127.0.0.1:*")
                try controlSocket.bind(control)
                let bound = (try xsub.lastEndpoint, try xpub.lastEndpoint)
                endpoints.withLock { $0 = .success(bound) }
                ready.signal()
                try proxy(frontend: xsub, backend: xpub, control: controlSocket)
            } catch {
                endpoints.withLock { if $0 == nil { $0 = .failure(error) } }
                ready.signal()
            }
        }
        ready.wait()
        let (frontend, backend) = try endpoints.withLock { $0! }.get()
        return SmokeBroker(frontend: frontend, backend: backend, context: context, control: control)
    }

    func stop() {
        guard let socket = try? context.socket(.pair), (try? socket.connect(control)) != nil else { return }
        try? socket.send(Array("TERMINATE".utf8))
    }
}
