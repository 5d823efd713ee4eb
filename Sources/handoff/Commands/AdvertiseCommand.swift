import ArgumentParser
import Foundation
import Handoff
import HandoffWire
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals
import ZeroMQ

/// `handoff advertise`: make an activity current until interrupted.
struct AdvertiseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "advertise", abstract: "Make an activity current on the bus until interrupted.")
    @Option(help: "The reverse-DNS activity type.") var type: String
    @Option(help: "The title.") var title = ""
    @Option(help: "userInfo as a JSON object (strings, numbers, booleans, arrays, objects).") var userInfo: String?
    @Option(help: "A webpage URL to fall back to.") var webpage: String?
    @Option(help: ArgumentHelp("A search keyword (repeatable): `handoff activities --keyword` finds it.", valueName: "word"))
    var keyword: [String] = []
    @Option(help: ArgumentHelp("A userInfo key a continuing node must receive (repeatable): it must be in --user-info.", valueName: "key"))
    var requiredKey: [String] = []
    @Option(help: "The activity expires this many seconds from now: it is withdrawn (this command ends then), and a continue is refused with activityExpired.")
    var expires: Double?
    @Option(help: "Stop after this many seconds (default: until SIGINT/SIGTERM).") var seconds: Double?
    @Option(help: "A document the activity is about: continuing nodes open it from shared storage, or pull it over a stream.") var document: String?
    @Option(help: "The document's version (higher is newer).") var documentVersion: UInt64 = 1
    @Flag(help: "Say that it advertises as one JSON object (activityId, activityType, node).") var json = false
    @OptionGroup var bus: BusOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard expires.map({ $0 > 0 && $0.isFinite }) ?? true else { throw ValidationError("--expires must be a number of seconds above 0") }
        guard webpage.map({ URL(string: $0) != nil }) ?? true else { throw ValidationError("--webpage must be a URL") }
    }

    func run() async throws {
        logging.bootstrap()
        let activity = try UserActivity(activityType: type)
        activity.title = title
        if let userInfo {
            guard let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(userInfo.utf8)) else {
                throw ValidationError("--user-info must be a JSON object")
            }
            activity.userInfo = object.mapValues(\.userInfoValue)
        }
        activity.webpageURL = webpage.flatMap(URL.init(string:))
        activity.keywords = Set(keyword)
        activity.requiredUserInfoKeys = Set(requiredKey)
        if let expires { activity.expirationDate = Date(timeIntervalSinceNow: expires) }
        if let document {
            activity.document = try DocumentReference.file(at: URL(fileURLWithPath: document).standardizedFileURL, version: documentVersion)
        }
        let logger = Logger(label: "handoff.advertise")
        let context = try Context()
        let node = try Node(configuration: try bus.configuration(name: "handoff-advertise"), context: context)
        defer { context.terminate() }  // after the node stopped: wait until its withdrawal has left
        try await activity.becomeCurrent(on: node)
        let group = ServiceGroup(services: [node], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        // Whichever comes first ends it: SIGTERM/SIGINT (which ends the run at once), or the time.
        try await withThrowingTaskGroup(of: Bool.self) { tasks in
            tasks.addTask { try await group.run(); return true }
            // Said once the node runs, so the group's signal handlers are in place: a SIGTERM sent
            // on seeing this line withdraws the activity instead of killing the process.
            await node.untilRunning()
            announce(json
                ? jsonLine(Advertising(activityId: activity.id, activityType: type, node: node.info.name))
                : "advertising \(activity.id) (\(type)) from \(node.info.name); Ctrl-C to withdraw")
            // An expired activity is withdrawn: nothing is left to advertise after it.
            if let seconds = [seconds, expires].compactMap(\.self).min() {
                tasks.addTask { try? await Task.sleep(for: .milliseconds(Int(seconds * 1000))); return false }
            }
            if try await tasks.next() == true {
                tasks.cancelAll()  // the run ended (a signal; the activity is withdrawn): stop the timer
            } else {
                await group.triggerGracefulShutdown()
                _ = try await tasks.next()
            }
        }
    }
}

/// `advertise --json`: the activity is on the bus.
private struct Advertising: Encodable {
    let event = "advertising"
    let activityId: String
    let activityType: String
    let node: String
}
