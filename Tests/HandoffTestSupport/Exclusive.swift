import Foundation
import Testing

/// Runs a test (each case of a parameterized one, each test of a suite it marks) alone among the
/// tests so marked, in every test target of the package: plain `swift test` runs tests in
/// parallel, and tests that start processes, bind ports and measure latencies on a 2-core machine
/// would measure each other and starve Swift's pool (one thread per core) with the blocking calls
/// their processes need. Tests without it (the protocol machines, the wire) still run beside them.
///
/// ```swift
/// @Suite("Continuation streams", .exclusive)
/// struct StreamTests { … }
/// ```
public struct Exclusive: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    /// A scope for each test case only: a suite holding the lock would keep its own tests out.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Exclusive? {
        testCase == nil ? nil : self
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        _ = Self.childrenEndWithTheRun
        try await TaskLimit.exclusive.run { try await function() }
    }
}

extension Exclusive {
    /// Every `handoff` (and test node, and benchmark role) these tests start ends with the test
    /// process, even when the run is killed or times out (ParentWatch, HANDOFF_EXIT_WITH_PARENT):
    /// nothing is left holding ports and sockets to break the next run. Set once, before the
    /// first such test starts a process (children inherit the environment).
    private static let childrenEndWithTheRun: Void = {
        setenv("HANDOFF_EXIT_WITH_PARENT", "1", 1)
    }()
}

extension Trait where Self == Exclusive {
    /// Runs alone among the tests marked `.exclusive` (``Exclusive``).
    public static var exclusive: Exclusive { Exclusive() }
}
