// The seeds' Contacts app as a Handoff plugin.
//
//   org.handoff.contacts.edit-contact   the draft form in userInfo, also a new contact never saved,
//                                       half filled; restored as this node's draft. Typing into the
//                                       form marks the activity needsSave: the form goes into
//                                       userInfo only when someone continues it (will-save)
//   org.handoff.contacts.view-contact   the contact in userInfo; restored as the contact on screen
//   org.handoff.contacts.list-contacts  userInfo holds the count; the whole list arrives over a
//                                       continuation stream and REPLACES the local list (as in the seeds)
//
// Each node keeps its contacts in <data>/contacts.pb (a ContactList), its draft in draft.pb and the
// contact on screen in viewing.pb, each written atomically (temp file, fsync, rename).

import Foundation
import Glibc
import HandoffPluginKit
import SwiftProtobuf

public final class ContactsPlugin: HandoffPlugin {
    public static let name = "contacts"
    public static let version = "1.0.0"
    public static let teamID: String? = "HANDOFF-SEEDS"
    public static let handlesStreams = true

    static let editContact = "org.handoff.contacts.edit-contact"
    static let viewContact = "org.handoff.contacts.view-contact"
    static let listContacts = "org.handoff.contacts.list-contacts"
    public static let activityTypes = [editContact, viewContact, listContacts]

    let host: PluginHost
    let store: ContactStore
    /// The id of the activity of each type this plugin has current: one at a time, as in the seeds'
    /// app (a new edit replaces the last one; `add` and `rm` update the shared list's count).
    private var current: [String: String] = [:]
    /// Who continued each type last (was-continued), and the last update heard of each type this
    /// node continued (did-update): what `contacts status` prints.
    private var continuedBy: [String: String] = [:]
    private var updates: [String: String] = [:]
    private let lock = NSLock()

    public init(host: PluginHost) throws {
        self.host = host
        store = ContactStore(folder: host.dataDirectory)
    }

    // MARK: Continuing side

    public func restore(_ activity: WireActivity) throws {
        switch activity.activityType {
        case Self.editContact:
            let draft = try Self.contact(from: activity.userInfo)
            try store.save(draft, as: "draft.pb")
            host.log("restored the draft of \(draft.firstName) \(draft.lastName) from \(activity.origin.name)")
        case Self.viewContact:
            let contact = try Self.contact(from: activity.userInfo)
            try store.save(contact, as: "viewing.pb")
            host.log("viewing \(contact.firstName) \(contact.lastName), continued from \(activity.origin.name)")
        case Self.listContacts:
            guard case .intValue(let count)? = activity.userInfo["count"]?.kind else {
                throw PluginFailure.invalidArgument("list-contacts without a count in userInfo")
            }
            host.log("\(activity.origin.name) shares \(count) contacts; the list follows on a stream")
        default:
            throw PluginFailure.invalidArgument("contacts does not handle \(activity.activityType)")
        }
    }

    // MARK: Streams (list-contacts)

    /// Originating side: sends the whole list. The continuing side sends nothing back.
    public func writeStream(for activity: WireActivity, to writer: StreamWriter) throws {
        guard activity.activityType == Self.listContacts, activity.origin.nodeID == host.nodeID else { return }
        let encoded = try store.loadList().serializedData()
        writer.setExpectedLength(UInt64(encoded.count))
        try writer.write(encoded)
    }

    /// Continuing side: the list replaces the local one, once the stream's end (length and checksum) checked out.
    public func readStream(for activity: WireActivity, from reader: StreamReader) throws {
        let bytes = try reader.readAll()
        guard activity.activityType == Self.listContacts, activity.origin.nodeID != host.nodeID else { return }
        let list: ContactList
        do {
            list = try ContactList(serializedBytes: bytes)
        } catch {
            throw PluginFailure.invalidArgument("the streamed contact list is not a ContactList: \(error)")
        }
        // The stream is the originator's list as it is when the stream opens, whole (its length and
        // checksum checked out); the count in userInfo is what the list held when the continue was
        // answered. Contacts added or removed in between are in the stream: it is the newer truth.
        var changed = ""
        if case .intValue(let count)? = activity.userInfo["count"]?.kind, count != list.contacts.count {
            changed = " (the activity said \(count): the list changed at \(activity.origin.name) since)"
        }
        try store.save(list, as: "contacts.pb")
        host.log("replaced the local list with \(list.contacts.count) contacts from \(activity.origin.name)\(changed)")
    }

    // MARK: Commands

    public func command(_ arguments: [String], output: (String) -> Void) throws {
        let usage = "usage: contacts add FIRST LAST PHONE EMAIL | list | rm ID | edit ID | new | type FIELD VALUE | save | view ID | share | draft | viewing | status"
        guard let subcommand = arguments.first else { throw PluginFailure.invalidArgument(usage) }
        switch (subcommand, arguments.count) {
        case ("add", 5):
            var contact = Contact()
            contact.id = String(UUID().uuidString.prefix(8)).lowercased()
            contact.firstName = arguments[1]
            contact.lastName = arguments[2]
            contact.phoneNumber = arguments[3]
            contact.email = arguments[4]
            var list = try store.loadList()
            list.contacts.append(contact)
            try store.save(list, as: "contacts.pb")
            try updateSharedList(count: list.contacts.count)
            output(contact.id)
        case ("list", 1):
            for contact in try store.loadList().contacts { output(Self.line(contact)) }
        case ("rm", 2):
            var list = try store.loadList()
            guard let index = list.contacts.firstIndex(where: { $0.id == arguments[1] }) else {
                throw PluginFailure.notFound("no contact with id \(arguments[1])")
            }
            list.contacts.remove(at: index)
            try store.save(list, as: "contacts.pb")
            try updateSharedList(count: list.contacts.count)
            output("removed \(arguments[1])")
        case ("edit", 2), ("view", 2):
            let contact = try find(arguments[1])
            if subcommand == "edit" {
                // The form opens on the contact: this node's draft until it is saved.
                try store.save(contact, as: "draft.pb")
                output(try replaceCurrent(Self.editActivity(contact, new: false)))
                return
            }
            var activity = WireActivity()
            activity.activityType = Self.viewContact
            activity.title = "Viewing \(contact.firstName) \(contact.lastName)"
            activity.userInfo = Self.userInfo(of: contact)
            activity.requiredUserInfoKeys = ["contactID"]
            output(try replaceCurrent(activity))
        case ("new", 1):
            // A new contact, not in the list until saved: the seeds' half-typed form.
            var draft = Contact()
            draft.id = String(UUID().uuidString.prefix(8)).lowercased()
            try store.save(draft, as: "draft.pb")
            output(try replaceCurrent(Self.editActivity(draft, new: true)))
        case ("type", 3):
            // A keystroke in the form: the draft changes here, and the activity is only marked
            // (needsSave); will-save puts the form in userInfo when someone continues it.
            guard var draft: Contact = try store.load("draft.pb") else { throw PluginFailure.notFound("no form open: `contacts new` or `contacts edit ID` first") }
            switch arguments[1] {
            case "firstName": draft.firstName = arguments[2]
            case "lastName": draft.lastName = arguments[2]
            case "phoneNumber": draft.phoneNumber = arguments[2]
            case "email": draft.email = arguments[2]
            default: throw PluginFailure.invalidArgument("no field \(arguments[1]): firstName, lastName, phoneNumber or email")
            }
            try store.save(draft, as: "draft.pb")
            if let id = lock.withLock({ current[Self.editContact] }) { try? host.needsSave(id) }
            output(Self.line(draft))
        case ("save", 1):
            // The form is done: the draft goes into the list (replacing the contact it edits), the
            // edit ends.
            guard let draft: Contact = try store.load("draft.pb") else { throw PluginFailure.notFound("no form open") }
            var list = try store.loadList()
            if let index = list.contacts.firstIndex(where: { $0.id == draft.id }) { list.contacts[index] = draft } else { list.contacts.append(draft) }
            try store.save(list, as: "contacts.pb")
            try updateSharedList(count: list.contacts.count)
            if let id = lock.withLock({ current.removeValue(forKey: Self.editContact) }) { try? host.end(id) }
            output(draft.id)
        case ("status", 1):
            let (continued, updated) = lock.withLock { (continuedBy, updates) }
            for (type, node) in continued.sorted(by: { $0.key < $1.key }) { output("continued \(type) by \(node)") }
            for (type, title) in updated.sorted(by: { $0.key < $1.key }) { output("updated \(type): \(title)") }
        case ("share", 1):
            output(try replaceCurrent(Self.listActivity(count: try store.loadList().contacts.count)))
        case ("draft", 1):
            if let draft: Contact = try store.load("draft.pb") { output(Self.line(draft)) }
        case ("viewing", 1):
            if let contact: Contact = try store.load("viewing.pb") { output(Self.line(contact)) }
        default:
            // docs/plugin-abi.md: an unknown subcommand is not found; a known one, bad arguments.
            let known: Set = ["add", "list", "rm", "edit", "new", "type", "save", "view", "share", "draft", "viewing", "status"]
            throw known.contains(subcommand) ? PluginFailure.invalidArgument(usage) : PluginFailure.notFound(usage)
        }
    }

    /// Makes `activity` current in place of this plugin's current one of its type, which ends.
    private func replaceCurrent(_ activity: WireActivity) throws -> String {
        let previous = lock.withLock { current[activity.activityType] }
        if let previous { try? host.end(previous) }
        let id = try host.becomeCurrent(activity)
        lock.withLock { current[activity.activityType] = id }
        return id
    }

    /// After `add` or `rm`: the shared list's activity, if one is current, says the new count (so a
    /// continuing node expects the list the stream will carry).
    private func updateSharedList(count: Int) throws {
        guard let id = lock.withLock({ current[Self.listContacts] }) else { return }
        var activity = Self.listActivity(count: count)
        activity.activityID = id
        do {
            try host.update(activity)
        } catch {
            lock.withLock { current[Self.listContacts] = nil }  // it ended meanwhile (continued once, expired)
        }
    }

    /// The edit-contact activity: the form in userInfo (`new` for a contact not saved yet).
    static func editActivity(_ draft: Contact, new: Bool) -> WireActivity {
        var activity = WireActivity()
        activity.activityType = editContact
        let name = "\(draft.firstName) \(draft.lastName)".trimmingCharacters(in: .whitespaces)
        activity.title = name.isEmpty ? "New contact" : "Editing \(name)"
        activity.userInfo = userInfo(of: draft)
        var flag = WireValue()
        flag.boolValue = new
        activity.userInfo["new"] = flag
        activity.requiredUserInfoKeys = ["contactID"]
        return activity
    }

    // MARK: ABI 1.1: will-save, was-continued, did-update

    /// will-save: the form as it is now goes into the edit-contact activity (marked by `type`).
    public func willSave(_ activity: WireActivity) throws -> WireActivity? {
        guard activity.activityType == Self.editContact, let draft: Contact = try store.load("draft.pb") else { return nil }
        let isNew = activity.userInfo["new"].map { $0.kind == .boolValue(true) } ?? false
        var refreshed = Self.editActivity(draft, new: isNew)
        refreshed.activityID = activity.activityID
        return refreshed
    }

    public func wasContinued(_ activity: WireActivity, by node: String) {
        lock.withLock { continuedBy[activity.activityType] = node }
        host.log("\(activity.title) (\(activity.activityType)) was continued by \(node)")
    }

    /// did-update: the originator changed an activity this node continued. A form keeps in step
    /// with it (the draft here follows); the list's new count is noted (`continue` again to fetch it).
    public func didUpdate(_ activity: WireActivity) {
        lock.withLock { updates[activity.activityType] = activity.title }
        if activity.activityType == Self.editContact, let draft = try? Self.contact(from: activity.userInfo) {
            try? store.save(draft, as: "draft.pb")
        }
        host.log("\(activity.origin.name) updated \(activity.activityType): \(activity.title)")
    }

    /// The list-contacts activity: the count in userInfo, the list itself over a stream.
    static func listActivity(count: Int) -> WireActivity {
        var activity = WireActivity()
        activity.activityType = listContacts
        activity.title = "\(count) contacts"
        var value = WireValue()
        value.intValue = Int64(count)
        activity.userInfo = ["count": value]
        activity.supportsContinuationStreams = true
        return activity
    }

    private func find(_ id: String) throws -> Contact {
        guard let contact = try store.loadList().contacts.first(where: { $0.id == id }) else {
            throw PluginFailure.notFound("no contact with id \(id)")
        }
        return contact
    }

    static func line(_ contact: Contact) -> String {
        "\(contact.id)\t\(contact.firstName) \(contact.lastName)\t\(contact.phoneNumber)\t\(contact.email)"
    }

    // MARK: userInfo ⇄ Contact

    static func userInfo(of contact: Contact) -> [String: WireValue] {
        func string(_ text: String) -> WireValue {
            var value = WireValue()
            value.stringValue = text
            return value
        }
        return ["contactID": string(contact.id), "firstName": string(contact.firstName), "lastName": string(contact.lastName),
                "phoneNumber": string(contact.phoneNumber), "email": string(contact.email)]
    }

    static func contact(from userInfo: [String: WireValue]) throws -> Contact {
        func string(_ key: String) throws -> String {
            guard case .stringValue(let text)? = userInfo[key]?.kind else {
                throw PluginFailure.invalidArgument("userInfo has no string \(key)")
            }
            return text
        }
        var contact = Contact()
        contact.id = try string("contactID")
        contact.firstName = try string("firstName")
        contact.lastName = try string("lastName")
        contact.phoneNumber = (try? string("phoneNumber")) ?? ""
        contact.email = (try? string("email")) ?? ""
        return contact
    }
}

/// The plugin's files, each written atomically.
struct ContactStore {
    let folder: URL

    /// Opens the store in `folder`, removing the temporaries of writes that a crash interrupted
    /// (`NAME.tmp-PID` of a process that is gone): each holds a whole copy of a file, and nothing
    /// else would ever remove them.
    init(folder: URL) {
        self.folder = folder
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        for name in names {
            guard let marker = name.range(of: ".tmp-", options: .backwards),
                  let pid = Int32(name[marker.upperBound...]), pid > 0 else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH {
                unlink(folder.appendingPathComponent(name).path)
            }
        }
    }

    func loadList() throws -> ContactList {
        try load("contacts.pb") ?? ContactList()
    }

    func load<Value: SwiftProtobuf.Message>(_ name: String) throws -> Value? {
        let url = folder.appendingPathComponent(name)
        guard let data = FileManager.default.contents(atPath: url.path) else { return nil }
        do {
            return try Value(serializedBytes: data)
        } catch {
            throw PluginFailure.failed("\(url.path) is damaged: \(error)")
        }
    }

    /// Writes `message` to a temporary file, fsyncs it, renames it over `name`, and fsyncs the folder.
    func save(_ message: some SwiftProtobuf.Message, as name: String) throws {
        let bytes: [UInt8] = try message.serializedBytes()
        let target = folder.appendingPathComponent(name).path
        let temporary = target + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw PluginFailure.failed("cannot create \(temporary): errno \(errno)") }
        var written = 0
        while written < bytes.count {
            let result = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, bytes.count - written) }
            guard result > 0 else {
                close(fd)
                unlink(temporary)
                throw PluginFailure.failed("cannot write \(temporary): errno \(errno)")
            }
            written += result
        }
        guard fsync(fd) == 0 else {
            close(fd)
            throw PluginFailure.failed("cannot fsync \(temporary): errno \(errno)")
        }
        close(fd)
        guard rename(temporary, target) == 0 else { throw PluginFailure.failed("cannot rename onto \(target): errno \(errno)") }
        let directory = open(folder.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            fsync(directory)
            close(directory)
        }
    }
}

@_cdecl("handoff_plugin_entry")
public func handoffPluginEntry() -> UnsafeRawPointer {
    HandoffPluginExport.descriptor(for: ContactsPlugin.self)
}
