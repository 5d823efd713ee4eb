// The README's Swift examples, each verbatim between its markers, compiled with the tests.
// ReadmeExamplesTests fails when a ```swift block of README.md is not found here line for line
// (indentation and import lines aside): change the README, then this file, and the compiler checks the example.
// Nothing here runs; the names the examples assume are the parameters and stubs around them.

import Foundation
import Handoff
import HandoffWire
import SwiftProtobuf
import ZeroMQ

enum ReadmeExamples {
    // README: a broker in a program of your own.
    static func embedBroker() async throws {
        // begin README
        let context = try Context()
        try await Broker.withRunning(.init(frontend: "tcp://*:5555", backend: "tcp://*:5556"), context: context) { broker in
            print("broker on \(broker.frontendEndpoint) and \(broker.backendEndpoint)")
            try await Task.sleep(for: .seconds(3600))
            print("\(broker.counters.cachedActivities) activities current")
        }   // stopped here: both ports are free again

        // Or by hand, for a broker that outlives one scope:
        let broker = try Broker.start(.init(frontend: "tcp://*:5555", backend: "tcp://*:5556"), context: context)
        // ... later:
        await broker.stop()
        // end README
    }

    // README: the originating side.
    static func advertise(form: DraftForm) async throws {
        // begin README
        let node = try Node(configuration: .init(
            name: "desk",
            bus: .broker(frontend: "tcp://broker:5555", backend: "tcp://broker:5556")))
        Task { try await node.run() }          // or run it in a swift-service-lifecycle ServiceGroup

        // edit-contact: the draft form lives in userInfo.
        let editing = try UserActivity(activityType: "org.handoff.contacts.edit-contact")
        editing.title = "Editing Ada Lovelace"
        editing.userInfo = ["contactID": "c-42", "firstName": "Ada", "lastName": "Lovelace",
                            "phoneNumber": "+44 20 7946 0000", "email": ""]
        editing.requiredUserInfoKeys = ["contactID"]      // not advertised without it
        editing.delegate = form                           // see below
        try await editing.becomeCurrent(on: node)        // refused if userInfo > 3 KB or a required key is missing

        // The user keeps typing: don't copy the form on every keystroke, just say it changed.
        editing.needsSave = true
        // end README
        _ = editing
    }

    // README: the activity's delegate.
    // begin README
    final class DraftForm: UserActivityDelegate {
        func userActivityWillSave(_ activity: UserActivity) async {
            activity.addUserInfoEntries(from: ["email": .string(await currentEmailFieldText())])
        }
        func userActivityWasContinued(_ activity: UserActivity, by node: NodeInfo) async {
            print("continued on \(node.name)")
        }
    }
    // end README

    // README: the continuing side.
    static func continueSide(node: Node, editor: DraftEditor, viewer: ContactViewer, appDelegate: any HandoffDelegate) async {
        func open(_ url: URL) {}
        // begin README
        await node.setContinuationHandler(forType: "org.handoff.contacts.edit-contact") { activity in
            await editor.restoreDraft(from: activity.userInfo)   // every typed value, as sent
        }
        await node.setContinuationHandler(forType: "org.handoff.contacts.view-contact") { activity in
            await viewer.show(contactID: activity.userInfo["contactID"]?.stringValue)
        }
        await node.setDelegate(appDelegate)   // willContinue(type) -> Bool, didFail(type, error), didUpdate(activity)

        for await event in await node.discover(.type(prefix: "org.handoff.contacts.")) {
            guard case .appeared(let activity) = event else { continue }
            do {
                switch try await node.continueActivity(activity) {
                case .restored(let continued): print("picked up", continued.title)
                case .webpage(let url): open(url)            // no handler here, but a webpageURL
                }
            } catch {
                print(error.code, error.message)             // HandoffError, typed
            }
        }
        // end README
    }

    // README: streams.
    static func streams(node: Node, activity: ContinuedActivity, store: ContactStore) async throws {
        // begin README
        // Continuing side: after continueActivity(...) returned .restored(let activity)
        let streams = try await node.openStreams(for: activity)
        var list = Data()
        for try await chunk in streams.input {            // AsyncSequence of Data chunks, no copies
            list.append(chunk)
            print(streams.input.progress)                 // "1048576 of 52428800 bytes"
        }
        let contacts = try ContactList(serializedBytes: list)   // or: try await streams.input.readAll()

        // Originating side: the activity's delegate
        func userActivity(_ activity: UserActivity, didReceive streams: ContinuationStreams) async {
            let encoded: Data = try! store.contactList.serializedData()
            streams.output.expectedLength = UInt64(encoded.count)
            try? await streams.output.write(encoded)      // suspends while the reader is behind
            try? await streams.output.finish()            // total length + checksum (CRC-32C)
        }
        // end README
        _ = contacts
    }

    // README: documents.
    static func documents(node: Node, activity: UserActivity, continued: ContinuedActivity, documentsFolder: URL) async throws {
        // begin README
        activity.document = try DocumentReference.file(at: URL(fileURLWithPath: "/srv/shared/plan.md"), version: 3)
        try await activity.becomeCurrent(on: node)          // the continuing side gets url, version, SHA-256, size

        // Continuing side (Node.Configuration.sharedFolders lists what this machine shares, e.g. an NFS mount):
        let opened = try await node.openDocument(of: continued, into: documentsFolder)
        // .sharedStorage: the originator's file itself, reached here and with the advertised hash
        // .localCopy:     this node's copy already has that content
        // .stream:        pulled over a continuation stream the originator's node serves, checked whole
        // end README
        _ = opened
    }

    // README: security.
    static func security() throws {
        // begin README
        let security = Security(
            keyPair: try KeyFile.readKeyPair(at: "/etc/handoff/keys/laptop.key"),
            authorizedKeys: try KeyFile.readPublicKeys(at: "/etc/handoff/keys"),
            brokerKey: try KeyFile.readPublicKey("/etc/handoff/keys/broker.pub"))
        var configuration = Node.Configuration(name: "laptop", bus: .broker(frontend: "tcp://broker:5555", backend: "tcp://broker:5556"))
        configuration.security = security
        configuration.teamID = "ORG.EXAMPLE"
        // end README
        _ = configuration
    }

    // README: the ZeroMQ wrapper.
    static func zeroMQ() async throws {
        // begin README
        let context = try Context()
        let subscriber = try context.socket(.sub)
        try subscriber.subscribe("A:org.handoff.contacts.")
        try subscriber.connect("tcp://127.0.0.1:5556")
        let frames = try await subscriber.receiveMultipart()   // suspends the task, not the thread
        // end README
        _ = frames
    }

    // What the examples assume.
    static func currentEmailFieldText() async -> String { "" }

    final class DraftEditor: Sendable {
        func restoreDraft(from userInfo: [String: UserInfoValue]) async {}
    }

    final class ContactViewer: Sendable {
        func show(contactID: String?) async {}
    }

    struct ContactStore {
        var contactList = ContactList()
    }
}
