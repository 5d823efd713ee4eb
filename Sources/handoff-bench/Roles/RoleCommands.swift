import ArgumentParser
import Foundation

// The processes a benchmark starts (the two ends of a stream or of continue round trips, a broker,
// the raw baselines' ends), each a hidden subcommand taking what its starter passes, as it is.

/// A role: prepares the process as every process of a run is (BenchEnvironment), then performs.
protocol Role: AsyncParsableCommand {
    var arguments: [String] { get }
    static func perform(_ arguments: [String]) async throws
}

extension Role {
    static func role(_ name: String) -> CommandConfiguration {
        CommandConfiguration(commandName: name, shouldDisplay: false)
    }

    func run() async throws {
        _ = BenchEnvironment.prepare(mallocDefault: false, timeout: 1_800, stage: Self.configuration.commandName ?? "role")
        try await Self.perform(arguments)
    }
}

extension HandoffBench {
    static let roles: [any ParsableCommand.Type] = [
        StreamOriginatorRole.self, StreamContinuerRole.self, FleetWatcherRole.self, FleetNodesRole.self, RawStreamRole.self, RawStreamServerRole.self,
        RawStreamClientRole.self, ContinueOriginatorRole.self, ContinueContinuerRole.self, ContinuePairRole.self, RawReplyServerRole.self,
        RawRequestClientRole.self, AdvertBrokerRole.self, RawProxyRole.self, CapacityPublisherRole.self, CapacitySubscriberRole.self,
        BrokerFloorRole.self, FloorReplierRole.self, FloorAskerRole.self,
    ]
}

struct StreamOriginatorRole: Role {
    static let configuration = role("stream-originator")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { try await runStreamOriginator(arguments) }
}

struct StreamContinuerRole: Role {
    static let configuration = role("stream-continuer")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { try await runStreamContinuer(arguments) }
}

struct FleetWatcherRole: Role {
    static let configuration = role("fleet-watcher")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { try await runFleetWatcher(arguments) }
}

struct FleetNodesRole: Role {
    static let configuration = role("fleet-nodes")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { try runFleetNodes(arguments) }
}

struct RawStreamRole: Role {
    static let configuration = role("raw-stream")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { runRawStream(arguments) }
}

struct RawStreamServerRole: Role {
    static let configuration = role("raw-stream-server")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { runRawStreamServer(arguments) }
}

struct RawStreamClientRole: Role {
    static let configuration = role("raw-stream-client")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { runRawStreamClient(arguments) }
}

struct ContinueOriginatorRole: Role {
    static let configuration = role("continue-originator")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { try await runContinueOriginator(arguments) }
}

struct ContinueContinuerRole: Role {
    static let configuration = role("continue-continuer")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { try await runContinueContinuer(arguments) }
}

struct ContinuePairRole: Role {
    static let configuration = role("continue-pair")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { try await runContinuePair(arguments) }
}

struct RawReplyServerRole: Role {
    static let configuration = role("raw-rep-server")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { runRawReplyServer(arguments) }
}

struct RawRequestClientRole: Role {
    static let configuration = role("raw-req-client")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { runRawRequestClient(arguments) }
}

struct AdvertBrokerRole: Role {
    static let configuration = role("advert-broker")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { try await runAdvertBroker() }
}

struct RawProxyRole: Role {
    static let configuration = role("raw-proxy")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { await runRawProxy(arguments) }
}

struct CapacityPublisherRole: Role {
    static let configuration = role("capacity-publisher")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { try runCapacityPublisher(arguments) }
}

struct CapacitySubscriberRole: Role {
    static let configuration = role("capacity-subscriber")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { try runCapacitySubscriber(arguments) }
}

struct BrokerFloorRole: Role {
    static let configuration = role("broker-floor")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { try runBrokerFloor(arguments) }
}

struct FloorReplierRole: Role {
    static let configuration = role("floor-replier")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { try await runFloorReplier(arguments) }
}

struct FloorAskerRole: Role {
    static let configuration = role("floor-asker")
    @Argument(parsing: .captureForPassthrough) var arguments: [String] = []
    static func perform(_ arguments: [String]) async throws { try await runFloorAsker(arguments) }
}
