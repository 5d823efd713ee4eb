import Foundation
import Handoff
import HandoffTestSupport
@_exported import HandoffTestNode
import Synchronization
import Testing

/// A direct-mode node on loopback with short timings, for tests. A continue waits 5 s for its
/// answer, as a user's would: on a slow hour of CI, 2 s failed continues whose subject was not
/// time (HandOverLimitTests); the tests of a timeout set their own.
func testConfiguration(_ name: String, peers: [String] = [], interval: Duration = .milliseconds(200)) -> Node.Configuration {
    var configuration = Node.Configuration(
        name: name, bus: .direct(listen: "tcp://127.0.0.1:*", peers: peers),
        advertiseInterval: interval, continueTimeout: .seconds(5), connectTimeout: .milliseconds(500))
    configuration.lease = interval * 3
    return configuration
}

/// Runs two nodes, `b` subscribed to `a` (and `a` to `b`), for the duration of `body`.
func withTwoNodes(
    configureA: (inout Node.Configuration) -> Void = { _ in },
    configureB: (inout Node.Configuration) -> Void = { _ in },
    _ body: (_ a: Node, _ b: Node) async throws -> Void
) async throws {
    var configurationA = testConfiguration("node-a")
    configureA(&configurationA)
    let a = try Node(configuration: configurationA)
    var configurationB = testConfiguration("node-b", peers: [a.busEndpoint!])
    configureB(&configurationB)
    let b = try Node(configuration: configurationB)
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await a.run() }
        group.addTask { try await b.run() }
        defer { group.cancelAll() }
        await a.untilRunning()
        await b.untilRunning()
        try await body(a, b)
    }
}

/// Makes `count` view-contact activities ("Contact 0", "Contact 1", ...) current on `node`, in order.
func viewContacts(_ count: Int, currentOn node: Node) async throws -> [UserActivity] {
    var activities: [UserActivity] = []
    for index in 0..<count {
        let activity = try UserActivity(activityType: "org.handoff.contacts.view-contact")
        activity.title = "Contact \(index)"
        try await activity.becomeCurrent(on: node)
        activities.append(activity)
    }
    return activities
}

/// Records what a delegate is told.
final class Recorder: UserActivityDelegate, HandoffDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var _log: [String] = []
    var log: [String] { lock.withLock { _log } }
    func record(_ line: String) { lock.withLock { _log.append(line) } }

    let willSave: (@Sendable (UserActivity) async -> Void)?
    let decline: Bool
    init(decline: Bool = false, willSave: (@Sendable (UserActivity) async -> Void)? = nil) {
        self.decline = decline
        self.willSave = willSave
    }

    func userActivityWillSave(_ activity: UserActivity) async {
        record("willSave")
        await willSave?(activity)
    }
    func userActivityWasContinued(_ activity: UserActivity, by node: NodeInfo) async {
        record("wasContinued by \(node.name)")
    }
    func node(_ node: Node, willContinueActivityWithType activityType: String) async -> Bool {
        record("willContinue \(activityType)")
        return !decline
    }
    func node(_ node: Node, didFailToContinueActivityWithType activityType: String, error: HandoffError) async {
        record("didFail \(activityType) \(error.code)")
    }
    func node(_ node: Node, didUpdate activity: ContinuedActivity) async {
        record("didUpdate v\(activity.version) \(activity.userInfo["draft"]?.stringValue ?? "")")
    }
}

/// Agents a test starts on one broker (``startAgentProcess``), each with its data folder and
/// control socket under `folder`; `stop()` ends them all.
final class TestAgents {
    let frontend: String, backend: String, plugins: URL, folder: URL
    private var processes: [Process] = []

    init(frontend: String, backend: String, plugins: URL, folder: URL) {
        (self.frontend, self.backend, self.plugins, self.folder) = (frontend, backend, plugins, folder)
    }

    /// Starts agent `name` and returns its control endpoint once it answers there.
    func start(_ name: String) async throws -> String {
        let control = "ipc://\(folder.path)/\(name).sock"
        processes.append(try await startAgentProcess(name, frontend: frontend, backend: backend, plugins: plugins,
                                                     data: folder.appendingPathComponent(name), control: control))
        return control
    }

    func stop() {
        for process in processes { process.terminate(); process.waitUntilExit() }
    }
}

/// A `handoff agent` process on the broker at `frontend`/`backend`, hosting the plugins in
/// `plugins`, with its data in `data` and its control socket at `control`; returned once that
/// socket answers. The caller terminates it.
func startAgentProcess(
    _ name: String, frontend: String, backend: String, plugins: URL, data: URL, control: String,
    standardError: FileHandle = .nullDevice, arguments extra: [String] = ["--log-level", "error"]
) async throws -> Process {
    let agent = Process()
    agent.executableURL = buildFolder.appendingPathComponent("handoff")
    agent.arguments = ["agent", "--name", name, "--broker", frontend, backend, "--plugins", plugins.path,
                       "--data", data.path, "--control", control] + extra
    agent.standardOutput = FileHandle.nullDevice
    agent.standardError = standardError
    try agent.spawn()
    let up = await eventually(within: .seconds(20)) { (try? await runHandoff(["plugins", "list", "--agent", control]))?.status == 0 }
    guard up else {
        agent.terminate()
        throw ProcessFailure("agent \(name) never answered on \(control)")
    }
    return agent
}

/// A `handoff agent` process (started with `arguments`) on a broker of its own, sharing one
/// contact's list: `body` gets the list-contacts activity as a node on the bus found it, and the
/// agent process (its log to `standardError`). The agent is stopped, and its data folder removed, whatever happens.
func withAgentSharingContacts<T>(
    _ name: String, arguments: [String], standardError: FileHandle = .nullDevice, _ body: (DiscoveredActivity, Process) async throws -> T
) async throws -> T {
    let (broker, frontend, backend) = try await startBroker()
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let control = "ipc://\(folder.path)/control.sock"
    let agent = try await startAgentProcess(name, frontend: frontend, backend: backend, plugins: buildFolder, data: folder,
                                            control: control, standardError: standardError, arguments: arguments)
    defer { agent.terminate(); agent.waitUntilExit() }
    #expect(try await runHandoff(["plugin", "contacts", "add", "Ada", "Lovelace", "+44", "ada@example.org", "--agent", control]).status == 0)
    #expect(try await runHandoff(["plugin", "contacts", "share", "--agent", control]).status == 0)
    let shared = try await Node.withRunning(brokerConfiguration("finder", frontend: frontend, backend: backend)) { node in
        var found: DiscoveredActivity?
        let deadline = ContinuousClock.now + .seconds(10)
        while found == nil, ContinuousClock.now < deadline {
            found = await node.newestActivity(ofType: "org.handoff.contacts.list-contacts")
            if found == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        return found
    }
    let activity = try #require(shared, "the agent's list-contacts activity never appeared")
    let result = try await body(activity, agent)
    _ = broker  // the broker runs until here
    return result
}

extension ContinuationResult {
    /// The restored activity, or `nil` for a webpage: for `#require`, so that a test cannot pass by
    /// returning early when the continuation did not restore.
    var restored: ContinuedActivity? {
        if case .restored(let activity) = self { activity } else { nil }
    }
}
