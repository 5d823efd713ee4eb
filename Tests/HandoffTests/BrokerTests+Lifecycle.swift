import Foundation
import HandoffWire
import SwiftProtobuf
import Synchronization
import Testing
import ZeroMQ
@testable import Handoff
import HandoffTestSupport

/// More of the broker suite: the capture socket, starting on a used address, stopping, run().
extension BrokerTests {
    @Test("the capture socket sees forwarded messages and subscriptions")
    func capture() async throws {
        let context = try Context()
        var configuration = Broker.Configuration.ephemeral()
        configuration.capture = "tcp://127.0.0.1:*"
        let broker = try Broker.start(configuration, context: context)
        let captureEndpoint = try #require(broker.captureEndpoint)
        #expect(captureEndpoint.hasPrefix("tcp://127.0.0.1:") && !captureEndpoint.hasSuffix(":*"))
        let publisher = try await connectPublisher(to: broker, context: context)
        let tap = try context.socket(.sub)
        try tap.subscribe("")
        try tap.connect(captureEndpoint)
        try await awaitDelivery(from: publisher, to: tap, probe: .presence(node: "probe"))

        let subscriber = try context.socket(.sub)
        try subscriber.subscribe("A:org.handoff.")
        try subscriber.connect(broker.backendEndpoint)
        #expect(try await receiveUntil(tap, within: .seconds(5)) { $0.bytes == subscription("A:org.handoff.") })

        let advertisement = try BusMessage.advertisement(id: "captured", type: "org.handoff.notes.edit")
        try await publish(advertisement, on: publisher)
        var captured: [[UInt8]]?
        while let frames = try await receiveMessage(tap, timeout: .seconds(5)) {
            if frames[0].bytes == advertisement.topic {
                captured = frames.map(\.bytes)
                break
            }
        }
        #expect(captured == [advertisement.topic, advertisement.envelope])
        await broker.stop()
    }

    @Test("start fails on an address in use with every socket closed; stop is idempotent and frees the ports")
    func startFailureAndStop() async throws {
        let context = try Context()
        let occupant = try context.socket(.pub)
        try occupant.bind("tcp://127.0.0.1:*")
        let taken = try occupant.lastEndpoint

        let loopEnded = Flag()
        var configuration = Broker.Configuration.ephemeral()
        configuration.backend = taken
        configuration.capture = "tcp://127.0.0.1:*"
        let error = #expect(throws: HandoffError.self) {
            try Broker.start(configuration, context: context, onLoopExit: {
                loopEnded.set()
            })
        }
        #expect(error?.code == .invalidConfiguration)
        #expect((error?.cause as? ZMQError)?.code == .addressInUse, "\(String(describing: error))")
        #expect(error?.message.contains(taken) == true, "\(String(describing: error))")
        #expect(loopEnded.isSet, "start threw before closing what it had opened")

        let badEndpoint = #expect(throws: HandoffError.self) {
            try Broker.start(.init(frontend: "bogus://x", backend: "tcp://127.0.0.1:*"), context: context)
        }
        #expect((badEndpoint?.cause as? ZMQError)?.code == .protocolNotSupported)
        let badCapacity = #expect(throws: HandoffError.self) {
            try Broker.start(Broker.Configuration.ephemeral(cacheCapacity: 0), context: context)
        }
        #expect(badCapacity?.code == .invalidConfiguration)
        var noKeyQuota = Broker.Configuration.ephemeral()
        noKeyQuota.maxActivitiesPerKey = 0
        let badKeyQuota = #expect(throws: HandoffError.self) { try Broker.start(noKeyQuota, context: context) }
        #expect(badKeyQuota?.code == .invalidConfiguration)
        // Four times the origin's quota unless set, also when the origin's is set after init.
        var raised = Broker.Configuration()
        raised.maxActivitiesPerOrigin = 1_000_000
        #expect(raised.effectiveMaxActivitiesPerKey == 4_000_000)
        #expect(badCapacity?.message.contains("cacheCapacity") == true)

        let broker = try Broker.start(.ephemeral(), context: context)
        #expect(broker.isRunning)
        await broker.stop()
        await broker.stop()
        #expect(!broker.isRunning)
        // Closed sockets release their ports (libzmq does it on its I/O thread, so allow a moment).
        let again = Broker.Configuration(frontend: broker.frontendEndpoint, backend: broker.backendEndpoint)
        var restarted: Broker?
        let deadline = ContinuousClock.now + .seconds(5)
        while restarted == nil && ContinuousClock.now < deadline {
            do {
                restarted = try Broker.start(again, context: context)
            } catch {
                #expect((error.cause as? ZMQError)?.code == .addressInUse, "\(error)")
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        #expect(restarted?.frontendEndpoint == broker.frontendEndpoint)
        await restarted?.stop()
    }

    @Test("a publisher's messages beyond publisherQueue wait in the publisher, not the broker; a subscriber's subscriptions beyond a few wait in the subscriber; the other queues keep highWaterMark")
    func publisherQueueBoundsTheFrontend() throws {
        let context = try Context()
        for (configuration, expected) in [
            (Broker.Configuration.ephemeral(), Int32(1_000)),
            ({ var custom = Broker.Configuration.ephemeral(); custom.publisherQueue = 64; return custom }(), 64),
        ] {
            let sockets = try BrokerSockets.open(configuration, context: context)
            defer { for socket in [sockets.frontend, sockets.backend] { socket.close() } }
            #expect(try sockets.frontend.get(.receiveHighWaterMark) == expected)
            #expect(try sockets.frontend.get(.sendHighWaterMark) == configuration.highWaterMark)
            #expect(try sockets.backend.get(.sendHighWaterMark) == configuration.highWaterMark)
            #expect(try sockets.backend.get(.receiveHighWaterMark) == Broker.SubscriptionBounds.receiveQueue)
        }
        var negative = Broker.Configuration.ephemeral()
        negative.publisherQueue = -1
        let refused = #expect(throws: HandoffError.self) { try Broker.start(negative, context: context) }
        #expect(refused?.code == .invalidConfiguration)
        #expect(refused?.message.contains("publisherQueue") == true)
    }

    @Test("run() keeps the broker up until its task is cancelled, then stops it")
    func serviceRun() async throws {
        let context = try Context()
        let broker = try Broker.start(.ephemeral(), context: context)
        let task = Task { try await broker.run() }
        try await Task.sleep(for: .milliseconds(100))
        #expect(broker.isRunning)
        task.cancel()
        try await task.value
        #expect(!broker.isRunning)
    }

    @Test("a broker stopping while a subscriber that reads nothing drops its connection leaves its process alive (libzmq 4.3.4 aborted it within 5 rounds when the backend's linger was 0)")
    func stopWhileSubscriberDrops() async throws {
        // In a process of its own: libzmq's abort would take the test process with it.
        let process = Process()
        process.executableURL = ChildProcess.testNodeURL
        process.arguments = ["broker-stop-race", "20"]
        process.environment = ProcessInfo.processInfo.environment.merging([
            ParentWatch.variable: "1", "SWIFT_BACKTRACE": "enable=no",
        ]) { $1 }
        let output = Spawning.pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.spawn()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        guard await eventually(within: .seconds(90), { !process.isRunning }) else {
            Issue.record("20 rounds did not end within 90 s")
            return
        }
        let said = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        #expect(process.terminationReason == .exit && process.terminationStatus == 0 && said.contains("NO ABORT 20"),
                "ended by \(process.terminationReason == .uncaughtSignal ? "signal" : "exit") \(process.terminationStatus): \(said)")
    }
}
