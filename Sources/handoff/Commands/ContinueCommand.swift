import ArgumentParser
import Foundation
import Handoff
import HandoffWire
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals
import ZeroMQ

/// `handoff continue`: continue an activity here, by id or type, with the plugins of this machine.
struct ContinueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "continue",
        abstract: "Continue an activity (by id or type) with the plugins here, or through an agent (--agent).")
    @Option(help: "The activity's id.") var id: String?
    @Option(help: "The newest activity of this type.") var type: String?
    @Option(help: "Ask this agent's control endpoint to continue it, instead of doing it here.") var agent: String?
    @OptionGroup var bus: BusOptions
    @OptionGroup var plugins: PluginOptions
    @Option(help: "The data folder for the plugins.") var data = FileManager.default.currentDirectoryPath + "/handoff-data"
    @Option(help: "How long to wait for the activity to be known, in seconds.") var wait: Double = 2
    @Option(help: "Continue without a plugin: open the activity's continuation streams and save what arrives to this file.")
    var save: String?
    @Option(help: "Give up on a continuation stream (--save's, or a plugin's) once the originator has sent nothing new, or taken nothing, for this many seconds although it keeps the stream open (0: wait as long as it stays connected).")
    var stallTimeout: Double = 120
    @Option(help: "Continue a document activity without a plugin: open its document from shared storage (--shared-folder), or pull a copy into this folder; a copy changed here is never overwritten.")
    var documentInto: String?
    @Option(help: ArgumentHelp("A folder this machine shares with the originator (repeatable): documents under it are opened in place.", valueName: "dir"))
    var sharedFolder: [String] = []
    @Flag(help: "Continue without a plugin: print the state handed over: its userInfo as JSON (bytes in base64, dates in ISO 8601, URLs as strings), required keys, keywords, webpage URL, expiry and version (with --json, in `state`).")
    var printState = false
    @Flag(help: "Trace the continue: the originator reports on the bus when it took the request and when it answered (with will-save's time), and each stream pair's open and end (a plugin's restore, --save); each hop is printed with its time, on each party's clock.")
    var trace = false
    @Flag(help: "Print the outcome as one JSON object (activityId, activityType, title, origin, milliseconds; webpageURL when there is no handler; saved and bytes with --save; state with --print-state; trace with --trace).")
    var json = false
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard (id == nil) != (type == nil) else { throw ValidationError("give exactly one of --id and --type") }
        guard save == nil || agent == nil else { throw ValidationError("--save works here, not through --agent") }
        guard stallTimeout >= 0, stallTimeout.isFinite else { throw ValidationError("--stall-timeout must be 0 (none) or a number of seconds") }
        guard documentInto == nil || (agent == nil && save == nil) else { throw ValidationError("--document-into works here, and not with --save") }
        guard !trace || agent == nil else { throw ValidationError("--trace works here, not through --agent") }
        guard !printState || (agent == nil && save == nil && documentInto == nil) else {
            throw ValidationError("--print-state works here, and not with --save or --document-into")
        }
    }

    func run() async throws {
        logging.bootstrap(defaultLevel: .warning)
        if let agent {
            var command = WireContinueCommand()
            command.activityID = id ?? ""
            command.activityType = type ?? ""
            let reply = try await askAgent(agent, .continueActivity(command))
            if json {
                let continued = reply.continued
                var line = ContinueLine(activityId: continued.activityID, activityType: continued.activityType,
                                        title: continued.title, origin: continued.originName)
                if continued.webpageURL.isEmpty { line.milliseconds = continued.milliseconds } else { line.webpageURL = continued.webpageURL }
                announce(jsonLine(line))
            } else {
                for line in reply.lines { announce(line) }
            }
            return
        }
        let logger = Logger(label: "handoff.continue")
        var configuration = try bus.configuration(name: "handoff-continue")
        configuration.sharedFolders = sharedFolder
        configuration.streamStallTimeout = stallTimeout > 0 ? .milliseconds(Int(stallTimeout * 1000)) : nil
        let opened = OpenedDocumentBox()
        // The line to print, and the same as a JSON object.
        let (message, object): (String, String) = try await Node.withRunning(configuration) { node in
            let runtime = PluginRuntime(node: node, dataDirectory: URL(fileURLWithPath: data))
            // A plugin that refuses to load is said, as the agent says it (else its type would just have no handler).
            for refusal in await runtime.start(loadPlugins(plugins, logger: logger)) { logger.warning("\(refusal)") }
            /// The continue itself; the plugins are shut down after it, whatever it came to.
            func continueFound() async throws -> (String, String) {
                let deadline = ContinuousClock.now + .milliseconds(Int(wait * 1000))
                var found: DiscoveredActivity?
                while found == nil && ContinuousClock.now < deadline {
                    found = if let id { await node.activities().first { $0.id == id } } else { await node.newestActivity(ofType: type!) }
                    if found == nil { try await Task.sleep(for: .milliseconds(20)) }
                }
                guard let found else {
                    throw HandoffError(.activityNotFound, id.map { "no activity with id \($0) is on the bus (run `handoff activities` to see what is)" }
                        ?? "no activity of type \(type!) is on the bus")
                }
                if let documentInto {
                    await node.setContinuationHandler(forType: found.activityType, teamID: found.teamID ?? "") { activity in
                        let document = try await node.openDocument(of: activity, into: URL(fileURLWithPath: documentInto))
                        opened.value.withLock { $0 = document }
                    }
                }
                if printState {
                    // The state is what the continue returns; printing it is the user's explicit choice, whatever the activity's team.
                    await node.setContinuationHandler(forType: found.activityType, teamID: found.teamID ?? "") { _ in }
                }
                if let save {
                    // Saving the raw streams is the user's explicit choice, whatever the activity's team.
                    await node.setContinuationHandler(forType: found.activityType, teamID: found.teamID ?? "") { activity in
                        try await saveStreams(of: activity, on: node, to: save)
                    }
                }
                var tracer = trace ? try await ContinueTracer(bus: bus, activityType: found.activityType) : nil
                /// The traced hops, ended with `outcome`, for the JSON object and as text lines.
                /// `asked`: a request went to the originator (not for a webpage, nor when this node
                /// declined or had no handler), so its hops are worth waiting for, a second at most.
                func traced(_ outcome: String, asked: Bool = true, streams: Bool = false) async -> (ContinueLine.Trace, String)? {
                    guard let tracer else { return nil }
                    let hops = await tracer.hops(within: asked ? .seconds(1) : .zero, outcome: outcome, ended: Date(), endpoint: found.continueEndpoint,
                                                 streams: streams)
                    return (ContinueLine.Trace(id: tracer.traceID, hops: hops), (["trace \(tracer.traceID):"] + TraceHopLine.format(hops)).joined(separator: "\n"))
                }
                let started = ContinuousClock.now
                tracer?.start()
                let progress = Task { if !json { await showProgress(of: node) } }
                defer { progress.cancel() }
                do {
                    let result: ContinuationResult
                    do {
                        result = try await node.continueActivity(found, wantingStreams: save != nil, traceID: tracer?.traceID)
                    } catch {
                        let asked = ![.noHandler, .declined, .notRunning].contains(error.code)
                        if let (object, lines) = await traced("failed: \(error)", asked: asked) { announce(json ? jsonLine(object) : lines) }
                        throw error
                    }
                    progress.cancel()
                    await progress.value
                    var object = ContinueLine(activityId: found.id, activityType: found.activityType, title: found.title, origin: found.origin.name)
                    let hops = await traced(result.isWebpage ? "no handler here: the webpage, nothing asked of the originator" : "restored",
                                            asked: !result.isWebpage, streams: !result.isWebpage && found.supportsContinuationStreams)
                    object.trace = hops?.0
                    switch result {
                    case .restored(let continued):
                        let took = milliseconds(ContinuousClock.now - started)
                        object.title = continued.title
                        object.milliseconds = took
                        if let save {
                            object.saved = save
                            object.bytes = (try? FileManager.default.attributesOfItem(atPath: save)[.size] as? Int) ?? 0
                        }
                        var text = "continued \"\(continued.title)\" (\(continued.activityType)) from \(continued.origin.name) in \(String(format: "%.1f", took)) ms"
                        if let document = opened.value.withLock({ $0 }) {
                            let source = switch document.source {
                            case .sharedStorage: "sharedStorage"
                            case .localCopy: "localCopy"
                            case .stream: "stream"
                            }
                            object.document = ContinueLine.Document(path: document.url.path, source: source, version: document.version)
                            text += "; document \(document.url.path) (version \(document.version), \(source == "stream" ? "pulled over a stream" : source == "localCopy" ? "the copy here" : "opened in place on shared storage"))"
                        }
                        if printState {
                            let state = ContinueLine.State(continued)
                            object.state = state
                            text += "\n" + state.lines.joined(separator: "\n")
                        }
                        return (text + (hops.map { "\n" + $0.1 } ?? ""), jsonLine(object))
                    case .webpage(let url):
                        object.webpageURL = url.absoluteString
                        return ("no handler here for \(found.activityType): continue at \(url)", jsonLine(object))
                    }
                } catch {
                    let underlying = error as? HandoffError
                    throw HandoffError(
                        underlying?.code ?? .handoffFailed, "could not continue \"\(found.title)\": \(underlying?.message ?? "\(error)")",
                        activityType: found.activityType, cause: error)
                }
            }
            do {
                let line = try await continueFound()
                await runtime.shutdown()
                return line
            } catch {
                await runtime.shutdown()
                throw error
            }
        }
        announce(json ? object : message)
    }
}

/// `continue --json`: what was continued, and how (the fields that apply are set).
private struct ContinueLine: Encodable {
    let activityId: String
    let activityType: String
    var title: String
    let origin: String
    var milliseconds: Double?
    var webpageURL: String?
    /// With `--save`: the file and its size.
    var saved: String?
    var bytes: Int?
    /// With `--document-into`: the document opened.
    var document: Document?
    /// With `--print-state`: the state handed over.
    var state: State?
    /// With `--trace`: the trace id and each hop, its time relative to the request.
    var trace: Trace?

    /// What `--print-state` prints of a continued activity: its state, as the originator handed it over.
    struct State: Encodable {
        let userInfo: [String: JSONValue]
        let requiredUserInfoKeys: [String]
        let keywords: [String]
        let webpageURL: String?
        /// ISO 8601.
        let expires: String?
        let version: UInt64
        let supportsContinuationStreams: Bool

        init(_ activity: ContinuedActivity) {
            userInfo = activity.userInfo.mapValues(JSONValue.init)
            requiredUserInfoKeys = activity.requiredUserInfoKeys.sorted()
            keywords = activity.keywords.sorted()
            webpageURL = activity.webpageURL?.absoluteString
            expires = activity.expirationDate.map { $0.formatted(JSONValue.dateFormat) }
            version = activity.version
            supportsContinuationStreams = activity.supportsContinuationStreams
        }

        /// The same as text lines, userInfo as one JSON object.
        var lines: [String] {
            var lines = ["  userInfo \(jsonLine(userInfo))"]
            if !requiredUserInfoKeys.isEmpty { lines.append("  required keys: " + requiredUserInfoKeys.joined(separator: ", ")) }
            if !keywords.isEmpty { lines.append("  keywords: " + keywords.joined(separator: ", ")) }
            if let webpageURL { lines.append("  webpage \(webpageURL)") }
            if let expires { lines.append("  expires \(expires)") }
            lines.append("  version \(version)" + (supportsContinuationStreams ? ", continuation streams" : ""))
            return lines
        }
    }

    struct Trace: Encodable {
        let id: String
        let hops: [TraceHopLine]
    }

    struct Document: Encodable {
        let path: String
        let source: String
        let version: UInt64
    }
}

private extension ContinuationResult {
    var isWebpage: Bool { if case .webpage = self { true } else { false } }
}
