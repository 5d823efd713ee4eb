import Foundation
import Synchronization
import Testing
import ZeroMQ
import HandoffTestSupport

@Suite("PUB/SUB and XPUB/XSUB", .exclusive)
struct PubSubTests {
    @Test("a subscriber receives only topics with its prefix, in order", arguments: Transport.allCases)
    func prefixFiltering(transport: Transport) async throws {
        let context = try Context()
        let publisher = try context.socket(.pub)
        let subscriber = try context.socket(.sub)
        let endpoint = try transport.bind(publisher)
        try subscriber.subscribe("handoff.adv.com.example.contacts.")
        try subscriber.subscribe("sync")
        try subscriber.connect(endpoint)
        try await awaitSubscription(publisher: publisher, subscriber: subscriber, probe: "sync")

        let topics = [
            "handoff.adv.com.example.contacts.edit-contact",
            "handoff.adv.com.example.notes.edit-note",
            "handoff.adv.com.example.contacts.view-contact",
            "handoff.adv.com.example",
            "HANDOFF.ADV.com.example.contacts.edit-contact",
            "handoff.adv.com.example.contacts.list-contacts",
        ]
        for (index, topic) in topics.enumerated() {
            try await publisher.send(multipart: [Array(topic.utf8), Array("payload \(index)".utf8)])
        }
        try await publisher.send(Array("sync.end".utf8))

        var received: [[String]] = []
        while true {
            let frames = try await subscriber.receiveMultipart()
            if frames.first?.string == "sync.end" { break }
            received.append(strings(frames))
        }
        #expect(received == [
            ["handoff.adv.com.example.contacts.edit-contact", "payload 0"],
            ["handoff.adv.com.example.contacts.view-contact", "payload 2"],
            ["handoff.adv.com.example.contacts.list-contacts", "payload 5"],
        ])
    }

    @Test("unsubscribing stops delivery of that prefix only", arguments: Transport.allCases)
    func unsubscribe(transport: Transport) async throws {
        let context = try Context()
        let publisher = try context.socket(.pub)
        let subscriber = try context.socket(.sub)
        let endpoint = try transport.bind(publisher)
        try subscriber.subscribe("a.")
        try subscriber.subscribe("b.")
        try subscriber.connect(endpoint)
        try await awaitSubscription(publisher: publisher, subscriber: subscriber, probe: "b.sync")
        try subscriber.unsubscribe("a.")
        // The unsubscription travels to the publisher asynchronously: wait until "a." stops arriving.
        let deadline = ContinuousClock.now + .seconds(5)
        var stillArriving = true
        while stillArriving && ContinuousClock.now < deadline {
            try await publisher.send(Array("a.probe".utf8))
            try await publisher.send(Array("b.marker".utf8))
            var sawA = false
            // Up to the marker, however long it takes: it always comes ("b." stays subscribed), and
            // one left on its way would be taken for "b.after" below.
            while let message = try await subscriber.receive(timeout: .seconds(5)) {
                if message.string == "a.probe" { sawA = true }
                if message.string == "b.marker" { break }
            }
            stillArriving = sawA
        }
        #expect(!stillArriving)
        try await publisher.send(Array("a.after".utf8))
        try await publisher.send(Array("b.after".utf8))
        let next = try await subscriber.receive(timeout: .seconds(5))
        #expect(next?.string == "b.after")
    }

    @Test("XPUB/XSUB proxy forwards subscriptions upstream and messages downstream, with a capture copy",
          arguments: Transport.allCases)
    func proxyForwards(transport: Transport) async throws {
        let context = try Context()
        struct Endpoints: Sendable { let front: String; let back: String; let capture: String; let control: String }
        // The proxy's thread owns its four sockets for their whole life.
        let endpoints: Endpoints = await onThread { ready in
            do {
                let xsub = try context.socket(.xsub)
                let xpub = try context.socket(.xpub)
                let capture = try context.socket(.pub)
                let control = try context.socket(.pair)
                let front = try transport.bind(xsub)
                let back = try transport.bind(xpub)
                let captureEndpoint = try transport.bind(capture)
                let controlEndpoint = "inproc://control-\(UUID().uuidString)"
                try control.bind(controlEndpoint)
                ready(Endpoints(front: front, back: back, capture: captureEndpoint, control: controlEndpoint))
                try proxy(frontend: xsub, backend: xpub, capture: capture, control: control)
            } catch {
                Issue.record("proxy thread failed: \(error)")
                ready(Endpoints(front: "", back: "", capture: "", control: ""))
            }
        }
        try #require(!endpoints.front.isEmpty)

        let publisher = try context.socket(.pub)
        try publisher.connect(endpoints.front)
        let subscriber = try context.socket(.sub)
        try subscriber.subscribe("contacts.")
        try subscriber.connect(endpoints.back)
        let monitor = try context.socket(.sub)
        try monitor.subscribe("")
        try monitor.connect(endpoints.capture)

        // The subscription must travel SUB → XPUB → proxy → XSUB → PUB before anything is delivered.
        try await awaitSubscription(publisher: publisher, subscriber: subscriber, probe: "contacts.sync")
        // The capture's subscriber joins in its own time too (a slow joiner of the capture): probe
        // until it sees one, then drain the subscriber's copies of those probes again.
        let captureDeadline = ContinuousClock.now + .seconds(30)
        var captureSees = false
        while !captureSees, ContinuousClock.now < captureDeadline {
            try await publisher.send(Array("contacts.sync".utf8))
            captureSees = try await monitor.receive(timeout: .milliseconds(20)) != nil
        }
        try #require(captureSees, "the capture never saw the probes")
        try await awaitSubscription(publisher: publisher, subscriber: subscriber, probe: "contacts.sync")
        try await publisher.send(Array("notes.edit".utf8))
        try await publisher.send(Array("contacts.view".utf8))
        let delivered = try await subscriber.receive(timeout: .seconds(5))
        #expect(delivered?.string == "contacts.view")
        #expect(try await subscriber.receive(timeout: .milliseconds(100)) == nil)

        // The capture socket sees traffic in both directions, notes.edit included.
        var captured: [String] = []
        while let message = try await monitor.receive(timeout: .milliseconds(200)) {
            captured.append(message.string ?? "")
        }
        #expect(captured.contains("notes.edit") || captured.contains("contacts.view"))

        let control = try context.socket(.pair)
        try control.connect(endpoints.control)
        try await control.send(Array("TERMINATE".utf8))
    }

    @Test("XPUB reports subscriptions and sends its welcome message to each new subscriber", arguments: Transport.allCases)
    func xpubVerboseAndWelcome(transport: Transport) async throws {
        let context = try Context()
        let xpub = try context.socket(.xpub)
        try xpub.set(.xpubVerbose, true)
        try xpub.set(.xpubWelcomeMessage, Array("welcome".utf8))
        let endpoint = try transport.bind(xpub)

        let first = try context.socket(.sub)
        try first.subscribe("welcome")
        try first.subscribe("activities.")
        try first.connect(endpoint)
        let second = try context.socket(.sub)
        try second.subscribe("welcome")
        try second.subscribe("activities.")
        try second.connect(endpoint)

        // libzmq attaches a new subscriber (and writes its welcome) when the XPUB's owner next
        // processes commands, as a broker's loop does. Reading the subscriptions does that.
        // A subscription message is 0x01 followed by the topic. Verbose: duplicates are reported too.
        // Until all four came (over tcp on a loaded machine the connections can take longer than
        // any one quiet spell: a CI run saw none within the first 300 ms), at most 10 s plus what
        // the machine held this task back meanwhile: as a parallel pass begins, hundreds of tests
        // queue on Swift's pool, and with the CPUs busy besides, this loop got two or three turns
        // in 10 s and read one subscription of four (2026-12-07).
        let probe = StallProbe.start(alsoOn: globalConcurrentExecutor)
        let started = ContinuousClock.now
        var subscriptions: [String] = []
        while subscriptions.count < 4, ContinuousClock.now < started + .seconds(10) + probe.heldSoFar {
            guard let message = try await xpub.receive(timeout: .milliseconds(300)) else { continue }
            let bytes = message.bytes
            #expect(bytes.first == 1)
            subscriptions.append(String(decoding: bytes.dropFirst(), as: UTF8.self))
        }
        let took = ContinuousClock.now - started, held = probe.stop()
        #expect(subscriptions.count == 4, "\(subscriptions) after \(took), this task held back \(held)")
        #expect(subscriptions.filter { $0 == "activities." }.count == 2)
        #expect(try await first.receive(timeout: .seconds(5))?.string == "welcome")
        #expect(try await second.receive(timeout: .seconds(5))?.string == "welcome")
        #expect(subscriptions.filter { $0 == "welcome" }.count == 2)
    }
}
