import HandoffWire
import Logging
import Synchronization
import ZeroMQ

/// Watches the bus for an operator's view (the live page of `--metrics`, `handoff top`): a SUB
/// socket of its own on a broker's backend, subscribed to everything, feeding a ``BusView``.
///
/// It costs nothing while nobody looks: the socket is made on the first ``snapshot()`` or
/// ``updates()``, and closed again once nobody has asked for ``idleTimeout`` and no update stream
/// is open. The broker's loop then forwards exactly as before (no capture copy, no per-message
/// work added to it): the view's cost is one more subscriber while someone watches.
public actor BusObserver {
    /// Where and how to watch.
    public struct Settings: Sendable {
        /// A broker's backend (or a direct bus's publisher): where the view subscribes.
        public var endpoint: String
        /// CURVE: this process's key pair and the broker's public key.
        public var curve: (keyPair: CurveKeyPair, serverKey: CurveKey)?
        /// What the view is of, as the page and `top` title it.
        public var source: String
        /// How long the view is kept after the last request, when no update stream is open.
        public var idleTimeout: Duration = .seconds(60)
        public var limits = BusView.Limits()

        public init(endpoint: String, curve: (keyPair: CurveKeyPair, serverKey: CurveKey)? = nil, source: String) {
            self.endpoint = endpoint
            self.curve = curve
            self.source = source
        }
    }

    public let settings: Settings
    private let context: Context
    /// The serving process's own refusals, by reason (read for each snapshot).
    private let refusals: @Sendable () async -> [String: UInt64]
    /// The view, shared with the receiving task (which alone writes messages into it).
    private var watch: Watch?
    private var lastDemand = ContinuousClock.now
    private var openStreams = 0
    private let logger = Logger(label: "handoff.observer")

    /// One run of the view: its socket's task and what it has seen.
    private final class Watch: Sendable {
        let view: Mutex<BusView>
        let task: Mutex<Task<Void, Never>?> = Mutex(nil)
        init(_ view: BusView) { self.view = Mutex(view) }
    }

    /// - Parameter context: The context to make the socket in (the broker's own, for its
    ///   `inproc://` view endpoint).
    public init(_ settings: Settings, context: Context, refusals: @escaping @Sendable () async -> [String: UInt64] = { [:] }) {
        self.settings = settings
        self.context = context
        self.refusals = refusals
    }

    /// Whether the view is being kept (someone looked lately).
    public var isWatching: Bool { watch != nil }

    /// The view as of now; starts watching when nobody was.
    public func snapshot() async -> BusViewSnapshot {
        lastDemand = .now
        let watch = startIfIdle()
        let refused = await refusals()
        let now = ContinuousClock.now
        return watch.view.withLock { view in
            view.expire(now: now)
            return view.snapshot(source: settings.source, refusals: refused, now: now)
        }
    }

    /// A snapshot every `interval` for as long as the caller reads it (the page's event stream);
    /// the view is kept while any is open.
    public func updates(every interval: Duration = .seconds(1)) -> AsyncStream<BusViewSnapshot> {
        openStreams += 1
        let (stream, continuation) = AsyncStream.makeStream(of: BusViewSnapshot.self, bufferingPolicy: .bufferingNewest(1))
        let task = Task(executorPreference: EventLoops.shared) { [self] in
            while !Task.isCancelled {
                continuation.yield(await snapshot())
                do { try await EventLoops.sleep(for: interval) } catch { break }  // the loops' clock, not the pool's
            }
            continuation.finish()
        }
        continuation.onTermination = { [self] _ in
            task.cancel()
            Task(executorPreference: EventLoops.shared) { await self.streamEnded() }
        }
        return stream
    }

    private func streamEnded() {
        openStreams -= 1
        lastDemand = .now
    }

    /// Stops watching now (the process is shutting down).
    public func stop() async {
        guard let watch else { return }
        self.watch = nil
        let task = watch.task.withLock { $0 }
        task?.cancel()
        await task?.value
    }

    // MARK: Watching

    private func startIfIdle() -> Watch {
        if let watch { return watch }
        let token = Topic.newSnapshotToken()
        let watch = Watch(BusView(limits: settings.limits, snapshotToken: token, now: .now))
        self.watch = watch
        let task = Task(executorPreference: EventLoops.shared) { [settings, context, logger] in
            do {
                try await Self.receive(into: watch, settings: settings, context: context, token: token) { [weak self] in
                    await self?.shouldKeepWatching(watch) ?? false
                }
            } catch is CancellationError {
            } catch {
                logger.warning("the bus view on \(settings.endpoint) stopped: \(error)")
            }
            await self.ended(watch)
        }
        watch.task.withLock { $0 = task }
        logger.debug("watching \(settings.endpoint) for the bus view")
        return watch
    }

    /// False once nobody has asked for the view for ``Settings/idleTimeout`` and no stream is open.
    private func shouldKeepWatching(_ watch: Watch) -> Bool {
        guard self.watch === watch else { return false }
        return openStreams > 0 || ContinuousClock.now - lastDemand < settings.idleTimeout
    }

    private func ended(_ watch: Watch) {
        if self.watch === watch { self.watch = nil }
        logger.debug("stopped watching \(settings.endpoint): nobody looked for \(settings.idleTimeout)")
    }

    /// Subscribes to everything and to a snapshot of every cached activity, then takes in each
    /// message until `keepWatching` says no (asked a few times a second).
    private static func receive(
        into watch: Watch, settings: Settings, context: Context, token: String,
        keepWatching: @Sendable () async -> Bool
    ) async throws {
        let socket = try context.socket(.sub)
        defer { socket.close() }
        try socket.set(.linger, 0)
        try socket.set(.maxMessageSize, Int64(WireLimits.maxBusFrame))
        if let curve = settings.curve { try socket.makeCurveClient(curve.keyPair, serverKey: curve.serverKey) }
        try socket.subscribe("")
        // The broker answers this with every cached advertisement (wire.proto, "Snapshots").
        try socket.subscribe(Topic.snapshot(token: token, typePrefix: ""))
        try socket.connect(settings.endpoint)
        var nextCheck = ContinuousClock.now
        while true {
            try Task.checkCancellation()
            if ContinuousClock.now >= nextCheck {
                guard await keepWatching() else { return }
                nextCheck = .now + .milliseconds(250)
                watch.view.withLock { $0.expire(now: .now) }
            }
            guard let first = try await socket.receive(timeout: .milliseconds(250)) else { continue }
            var frames = [first]
            while frames.last!.hasMore {
                let next = try await socket.receive()
                if frames.count < 3 { frames.append(next) }
            }
            // A hub's copies for the sites below repeat what its subscribers hear anyway.
            if frames[0].withUnsafeBytes({ $0.starts(with: Topic.sitePrefixBytes) }) { continue }
            let now = ContinuousClock.now
            watch.view.withLock { view in
                if frames.count == 2 {
                    view.observe(topic: frames[0].bytes, envelope: frames[1].bytes, now: now)
                } else {
                    view.observeMalformed(bytes: frames.reduce(0) { $0 + $1.count }, now: now)
                }
            }
        }
    }
}
