import Foundation
import Handoff
import Testing
import HandoffTestSupport

/// A plugin-hosting agent process driven over standard input.
final class Agent: @unchecked Sendable {
    let child: ChildProcess
    let input: FileHandle
    private var consumed = 0

    init(frontend: String, backend: String, plugins: URL, data: URL) throws {
        let pipe = Spawning.pipe()
        child = try ChildProcess(["agent", frontend, backend, plugins.path, data.path], standardInput: pipe)
        input = pipe.fileHandleForWriting
    }

    func ready() async throws -> [String] {
        _ = try await child.ready()
        let lines = child.output
        consumed = lines.count
        return lines
    }

    /// Sends one command; returns its output lines. Throws on ERR.
    func run(_ command: String) async throws -> [String] {
        input.write(Data((command + "\n").utf8))
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let lines = child.output
            if let end = lines[consumed...].firstIndex(where: { $0 == "OK" || $0.hasPrefix("ERR") }) {
                let output = Array(lines[consumed..<end])
                let last = lines[end]
                consumed = end + 1
                if last.hasPrefix("ERR") { throw ProcessFailure("\(command): \(last)") }
                return output
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw ProcessFailure("\(command): no answer")
    }
}

/// Runs `command` on `agent` until it prints `expected` (within 5 s, plus what the machine held the
/// process back meanwhile).
func eventuallyLines(_ agent: Agent, _ command: String, _ expected: [String]) async throws -> Bool {
    let deadline = WaitDeadline(.seconds(5))
    while !deadline.passed {
        if try await agent.run(command) == expected { return true }
        try await Task.sleep(for: .milliseconds(50))
    }
    return false
}

/// A broker and test agents hosting the built Contacts plugin, in a temporary folder.
struct ContactsAgents {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("contacts-\(UUID().uuidString)")
    let broker: ChildProcess
    let frontend: String, backend: String

    init() async throws {
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("plugins"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: buildFolder.appendingPathComponent("libHandoffContactsPlugin.so"),
                                         to: folder.appendingPathComponent("plugins/contacts.so"))
        (broker, frontend, backend) = try await startBroker()
    }

    /// A new agent with its own data folder, once it has loaded the plugin.
    func agent(_ name: String) async throws -> Agent {
        let agent = try Agent(frontend: frontend, backend: backend, plugins: folder.appendingPathComponent("plugins"), data: folder.appendingPathComponent(name))
        let loaded = try await agent.ready()
        try #require(loaded.contains("LOADED contacts"), "\(loaded)")
        return agent
    }

    func remove() { try? FileManager.default.removeItem(at: folder) }
}

@Suite("The Contacts plugin across two processes", .exclusive)
struct ContactsPluginTests {
    @Test("edit-contact, view-contact and list-contacts (the list over a stream) restore on another process")
    func contactsAcrossProcesses() async throws {
        let cluster = try await ContactsAgents()
        defer { cluster.remove() }
        let a = try await cluster.agent("a")
        let b = try await cluster.agent("b")

        let ada = try #require(try await a.run("plugin contacts add Ada Lovelace +44-20-7946-0000 ada@example.org").first)
        _ = try await a.run("plugin contacts add Alan Turing +44-161-496-0000 alan@example.org")
        _ = try await a.run("plugin contacts add Grace Hopper +1-202-555-0100 grace@example.org")
        _ = try await b.run("plugin contacts add Stale Entry 000 stale@example.org")
        let listOnA = try await a.run("plugin contacts list")
        #expect(listOnA.count == 3)

        // edit-contact: the draft form travels in userInfo and becomes B's draft.
        _ = try await a.run("plugin contacts edit \(ada)")
        _ = try await b.run("wait org.handoff.contacts.edit-contact")
        #expect(try await b.run("continue org.handoff.contacts.edit-contact") == ["CONTINUED Editing Ada Lovelace"])
        #expect(try await b.run("plugin contacts draft") == ["\(ada)\tAda Lovelace\t+44-20-7946-0000\tada@example.org"])

        // view-contact
        _ = try await a.run("plugin contacts view \(ada)")
        _ = try await b.run("wait org.handoff.contacts.view-contact")
        #expect(try await b.run("continue org.handoff.contacts.view-contact") == ["CONTINUED Viewing Ada Lovelace"])
        #expect(try await b.run("plugin contacts viewing") == ["\(ada)\tAda Lovelace\t+44-20-7946-0000\tada@example.org"])

        // list-contacts: the count in userInfo, the whole list over a stream, replacing B's list.
        _ = try await a.run("plugin contacts share")
        _ = try await b.run("wait org.handoff.contacts.list-contacts")
        #expect(try await b.run("continue org.handoff.contacts.list-contacts") == ["CONTINUED 3 contacts"])
        #expect(try await b.run("plugin contacts list") == listOnA)

        // One activity of each kind at a time: a second edit replaces the first.
        let alan = try #require(listOnA.first { $0.contains("Alan") }?.split(separator: "\t").first.map(String.init))
        _ = try await a.run("plugin contacts edit \(alan)")
        #expect(try await eventuallyLines(b, "known org.handoff.contacts.edit-contact", ["Editing Alan Turing"]))
        // After sharing, adding a contact updates the shared list: a continuing node gets all four.
        _ = try await a.run("plugin contacts add Katherine Johnson +1-757-555-0100 katherine@example.org")
        #expect(try await eventuallyLines(b, "known org.handoff.contacts.list-contacts", ["4 contacts"]))
        #expect(try await b.run("continue org.handoff.contacts.list-contacts") == ["CONTINUED 4 contacts"])
        #expect(try await b.run("plugin contacts list").count == 4)
        _ = cluster
    }

    @Test("a list that grows while it is continued is taken as streamed: the stream (its length and checksum verified) is the originator's list as it is now, and the count advertised before it only what the continuing side was told to expect")
    func listGrowsWhileContinued() async throws {
        let cluster = try await ContactsAgents()
        defer { cluster.remove() }
        let a = try await cluster.agent("a")
        let b = try await cluster.agent("b")
        _ = try await a.run("plugin contacts add Ada Lovelace +44 ada@example.org")
        _ = try await a.run("plugin contacts share")
        _ = try await b.run("wait org.handoff.contacts.list-contacts")
        // A adds contacts as fast as it answers while B continues again and again: some adds land
        // between a continue's answer (its count) and the list's stream.
        async let adding: Void = {
            for index in 0..<60 { _ = try await a.run("plugin contacts add First\(index) Last\(index) +1 f\(index)@example.org") }
        }()
        var failures: [String] = []
        for _ in 0..<20 {
            do { _ = try await b.run("continue org.handoff.contacts.list-contacts") } catch { failures.append("\(error)") }
        }
        try await adding
        #expect(failures.isEmpty, "\(failures)")
        // B's list is A's as it was at B's last stream: its first contacts, in order.
        let onA = try await a.run("plugin contacts list"), onB = try await b.run("plugin contacts list")
        #expect(!onB.isEmpty && onA.starts(with: onB), "B: \(onB.count), A: \(onA.count)")
        _ = cluster
    }

    @Test("the newest edit-contact across three processes is the one made current last by its origin's clock, also for a node that joins later and learns them all at once from the broker's snapshot")
    func newestAcrossProcesses() async throws {
        let cluster = try await ContactsAgents()
        defer { cluster.remove() }
        let a = try await cluster.agent("a")
        let c = try await cluster.agent("c")
        let ada = try #require(try await a.run("plugin contacts add Ada Lovelace +44 ada@example.org").first)
        let grace = try #require(try await c.run("plugin contacts add Grace Hopper +1 grace@example.org").first)
        _ = try await a.run("plugin contacts edit \(ada)")
        try await Task.sleep(for: .milliseconds(50))
        _ = try await c.run("plugin contacts edit \(grace)")

        // A late joiner hears of both at once, in the snapshot's order.
        let b = try await cluster.agent("b")
        #expect(try await eventuallyLines(b, "known org.handoff.contacts.edit-contact", ["Editing Ada Lovelace", "Editing Grace Hopper"]))
        #expect(try await b.run("continue org.handoff.contacts.edit-contact") == ["CONTINUED Editing Grace Hopper"])

        // A opens Ada's form again: now hers is the newest.
        _ = try await a.run("plugin contacts edit \(ada)")
        let newest = await eventually {
            (try? await b.run("continue org.handoff.contacts.edit-contact")) == ["CONTINUED Editing Ada Lovelace"]
        }
        #expect(newest)
        _ = cluster
    }

    @Test("ABI 1.1 through the Swift kit: typing into a new contact's form marks it needsSave, will-save hands the half-typed form to the continuing side; was-continued and did-update reach the plugins")
    func halfTypedDraft() async throws {
        let cluster = try await ContactsAgents()
        defer { cluster.remove() }
        let a = try await cluster.agent("a")
        let b = try await cluster.agent("b")

        // A new contact, never saved, half typed: the advertisement still says "New contact".
        _ = try await a.run("plugin contacts new")
        #expect(try await eventuallyLines(b, "known org.handoff.contacts.edit-contact", ["New contact"]))
        _ = try await a.run("plugin contacts type firstName Ada")
        _ = try await a.run("plugin contacts type phoneNumber +44-20-7946")
        // Continuing it asks A to save first: the form as typed comes across.
        #expect(try await b.run("continue org.handoff.contacts.edit-contact") == ["CONTINUED Editing Ada"])
        let draft = try #require(try await b.run("plugin contacts draft").first)
        #expect(draft.hasSuffix("\tAda \t+44-20-7946\t"), "\(draft)")
        #expect(try await a.run("plugin contacts list").isEmpty, "the new contact is not saved yet")
        let status = try await a.run("plugin contacts status")
        #expect(status.contains { $0.hasPrefix("continued org.handoff.contacts.edit-contact by ") }, "\(status)")

        // did-update: B holds the list it continued; A's list grows, and B's plugin hears of it.
        _ = try await a.run("plugin contacts save")
        _ = try await a.run("plugin contacts share")
        _ = try await b.run("wait org.handoff.contacts.list-contacts")
        #expect(try await b.run("continue org.handoff.contacts.list-contacts") == ["CONTINUED 1 contacts"])
        _ = try await a.run("plugin contacts add Grace Hopper +1-202-555-0100 grace@example.org")
        #expect(try await eventuallyLines(b, "plugin contacts status", ["updated org.handoff.contacts.list-contacts: 2 contacts"]))
        _ = cluster
    }

    @Test("temporaries left by writes a crash interrupted are removed when the store opens; a live writer's are kept")
    func staleTemporaries() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("contacts-\(UUID().uuidString)")
        let plugins = folder.appendingPathComponent("plugins")
        let store = folder.appendingPathComponent("data/contacts")
        try FileManager.default.createDirectory(at: plugins, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.copyItem(at: buildFolder.appendingPathComponent("libHandoffContactsPlugin.so"),
                                         to: plugins.appendingPathComponent("contacts.so"))
        // A process that has exited: its pid names a writer that is gone.
        let gone = Process()
        gone.executableURL = URL(fileURLWithPath: "/bin/true")
        try gone.spawn()
        gone.waitUntilExit()
        let dead = store.appendingPathComponent("contacts.pb.tmp-\(gone.processIdentifier)")
        let live = store.appendingPathComponent("contacts.pb.tmp-\(getpid())")
        try Data(count: 1 << 20).write(to: dead)
        try Data(count: 1 << 20).write(to: live)

        let (broker, frontend, backend) = try await startBroker()
        let agent = try Agent(frontend: frontend, backend: backend, plugins: plugins, data: folder.appendingPathComponent("data"))
        #expect(try await agent.ready().contains("LOADED contacts"))
        #expect(!FileManager.default.fileExists(atPath: dead.path), "a dead writer's temporary must be removed")
        #expect(FileManager.default.fileExists(atPath: live.path), "a live writer's temporary must be kept")
        _ = try await agent.run("plugin contacts add Ada Lovelace +44-20-7946-0000 ada@example.org")
        #expect(try await agent.run("plugin contacts list").count == 1)
        _ = broker
    }
}

@Suite("The C plugin (protobuf-c)", .exclusive)
struct NotesPluginTests {
    @Test("the C plugin restores its type and decodes every field of the activity with protobuf-c")
    func restoresEveryField() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("notes-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let plugin = try PluginLoader.load(file: buildFolder.appendingPathComponent("libHandoffNotesPlugin.so").path)
        #expect(plugin.name == "notes" && plugin.activityTypes == ["org.handoff.notes.edit-note"] && plugin.teamID == "NOTES-TEAM")

        try await withTwoNodes { a, b in
            let runtime = PluginRuntime(node: b, dataDirectory: folder)
            #expect(await runtime.start([plugin]).isEmpty)

            let note = try UserActivity(activityType: "org.handoff.notes.edit-note")
            note.title = "Poems: \"Roses\" π"
            note.userInfo = [
                "text": "Roses are red,\nviolets\tare blue",
                "length": 31,
                "offset": -7,
                "ratio": 0.5,
                "pinned": true,
                "thumbnail": .bytes(Data([0x00, 0x01, 0xAB, 0xFF])),
                "source": .url(URL(string: "https://notes.example.org/n/42")!),
                "created": .date(Date(timeIntervalSince1970: 1_700_000_000.5)),
                "tags": ["math", "poetry"],
                "contact": ["city": "London", "emails": ["ada@example.org"]],
            ]
            note.requiredUserInfoKeys = ["text"]
            note.webpageURL = URL(string: "https://notes.example.org/n/42")
            note.keywords = ["math", "poetry"]
            note.expirationDate = Date(timeIntervalSince1970: 1_800_000_000)
            note.teamID = "NOTES-TEAM"
            try await note.becomeCurrent(on: a)

            guard case .restored(let continued) = try await b.continueActivity(try await discovered(note.id, on: b)) else {
                Issue.record("the notes plugin should have restored the note")
                return
            }
            let file = folder.appendingPathComponent("notes/restored/\(note.id).txt")
            let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let expected = [
                "activity_id: \(note.id)",
                "activity_type: org.handoff.notes.edit-note",
                "title: Poems: \"Roses\" π",
                "user_info.contact.city: London",
                "user_info.contact.emails: [ada@example.org]",
                "user_info.created: 1700000000.500000000",
                "user_info.length: 31",
                "user_info.offset: -7",
                "user_info.pinned: true",
                "user_info.ratio: 0.5",
                "user_info.source: https://notes.example.org/n/42",
                "user_info.tags: [math, poetry]",
                "user_info.text: Roses are red,\\nviolets\\tare blue",
                "user_info.thumbnail: 0001abff",
                "required_user_info_keys: [text]",
                "webpage_url: https://notes.example.org/n/42",
                "keywords: [math, poetry]",
                "expiration: 1800000000.000000000",
                "eligible_for_handoff: true",
                "supports_continuation_streams: false",
                "team_id: NOTES-TEAM",
                "origin.node_id: \(a.id)",
                "origin.name: node-a",
                "origin.host: \(a.info.host)",
                "version: \(continued.version)",
            ]
            #expect(Array(lines.prefix(expected.count)) == expected)
            let updated = try #require(lines.dropFirst(expected.count).first)
            let seconds = try #require(Double(updated.replacingOccurrences(of: "updated_at: ", with: "")))
            #expect(abs(seconds - continued.updatedAt.timeIntervalSince1970) < 0.001)

            // Its command goes through the host table too: `new` makes a note current with protobuf-c bytes.
            let created = try await runtime.command(plugin: "notes", ["new", "Shopping", "eggs and milk"])
            let id = try #require(created.last)
            let current = await b.currentActivities.first { $0.id == id }
            #expect(current?.activityType == "org.handoff.notes.edit-note")
            #expect(current?.title == "Shopping")
            #expect(current?.userInfo["text"] == "eggs and milk")
            #expect(current?.teamID == "NOTES-TEAM")
            #expect(try await runtime.command(plugin: "notes", ["show", note.id]) == Array(lines.filter { !$0.isEmpty }))
            do throws(HandoffError) {
                _ = try await runtime.command(plugin: "notes", ["frobnicate"])
                Issue.record("an unknown command must fail")
            } catch {
                #expect(error.code == .pluginFailed)
                #expect(error.details["plugin"] == "notes")
                #expect(error.message.contains("usage"))
            }
        }
    }
}
