import Foundation
import HandoffWire
import Logging
import ZeroMQ

/// The node's DEALERs to originators: made on the first continue towards an endpoint, awaited
/// until their connection is up (or refused at the handshake), watched for drops and refusals,
/// read for replies and stream chunks, and closed once nothing needs them.
extension Node {
    /// The DEALER for an originator, with a live connection, or `connectionUnavailable`.
    ///
    /// Secure, it connects only to an originator whose advertised key is in the account, and
    /// authenticates it by that key at the CURVE handshake.
    func connectedClient(_ endpoint: String, serverKey: CurveKey?, activityType: String) async throws(HandoffError) -> Client {
        let client = try originClient(endpoint, serverKey: serverKey, activityType: activityType)
        try await awaitConnection(of: client, activityType: activityType)
        return client
    }

    /// Waits until `client` has a live connection, as ``OriginConnection`` says: as long as
    /// `connectTimeout`, `unauthorized` as soon as the originator refuses this node's key at the
    /// handshake (``watchConnection(to:client:)`` reads it while this waits).
    func awaitConnection(of client: Client, activityType: String) async throws(HandoffError) {
        let connectTimeout = own.configuration.connectTimeout
        let deadline = ContinuousClock.now + connectTimeout
        // Kept open meanwhile: pruneClients, once per presence, closes DEALERs nothing needs.
        client.connection.waitBegins()
        defer { client.connection.waitEnds() }
        var writable = false
        while true {
            switch client.connection.wait(writable: writable, remaining: ContinuousClock.now.duration(to: deadline), connectTimeout: connectTimeout, activityType: activityType) {
            case .connected:
                return
            case .fail(let error):
                throw error
            case .wait(let slice):
                // With ZMQ_IMMEDIATE the DEALER is writable only while a connection is up.
                do {
                    writable = try await client.socket.waitUntilReady(for: .writable, timeout: slice).contains(.writable)
                } catch {
                    throw client.connection.waitEnded(cancelled: Task.isCancelled, activityType: activityType)
                }
            }
        }
    }

    /// The DEALER for an originator, connected or connecting (``connectedClient(_:serverKey:activityType:)``
    /// without the wait).
    func originClient(_ endpoint: String, serverKey: CurveKey?, activityType: String) throws(HandoffError) -> Client {
        try OriginConnection.authorize(endpoint: endpoint, serverKey: serverKey, authorizes: security?.authorizes, activityType: activityType)
        if let existing = sockets.clients[endpoint], !existing.connection.serves(serverKey: serverKey) {
            existing.close()
            sockets.clients[endpoint] = nil
        }
        let client: Client
        do {
            client = try self.client(for: endpoint, serverKey: serverKey)
        } catch {
            throw HandoffError(.connectionUnavailable, "cannot connect to the originator at \(endpoint): \(error)", activityType: activityType)
        }
        return client
    }

    /// The DEALER for an originator, made (and connecting) when there is none.
    func client(for endpoint: String, serverKey: CurveKey?) throws(ZMQError) -> Client {
        if let existing = sockets.clients[endpoint] { return existing }
        let client = try Client(endpoint: endpoint, context: context, security: security, serverKey: serverKey, limits: continuationLimits)
        sockets.clients[endpoint] = client
        let identity = ObjectIdentifier(client)
        spawn { await self.receiveReplies(from: endpoint, client: identity) }
        spawn { await self.watchConnection(to: endpoint, client: identity) }
        return client
    }

    /// Drops the connection to an originator as a broken network would (a new DEALER, a new TCP
    /// connection, a new routing id at the originator); streams with it resume. For tests.
    func dropConnection(to endpoint: String) {
        guard let client = sockets.clients.removeValue(forKey: endpoint) else { return }
        try? client.socket.set(.linger, 0)
        client.close()
        interruptStreams(to: endpoint)
    }

    /// Forgets every stream pair without telling anyone, as a process that died would. For tests.
    func forgetAllStreamsForTesting() {
        streams.removeAll()
        for client in sockets.clients.values {
            try? client.socket.set(.linger, 0)
            client.close()
        }
        sockets.clients.removeAll()
    }

    /// Receives what the originator at `endpoint` sends, for as long as the client `identity` is
    /// the node's client for that endpoint.
    func receiveReplies(from endpoint: String, client identity: ObjectIdentifier) async {
        var burst = ReceiveBurst()
        while let client = sockets.clients[endpoint], ObjectIdentifier(client) == identity, await burst.next() {
            let received: [Frame]?
            do { received = try await client.socket.receiveMultipart(maxFrames: 2) } catch { return }
            if let received {
                observability.metrics.received(on: .continuationClient, bytes: received.reduce(0) { $0 + $1.count })
                if let descriptor = received.last?.sourceDescriptor { sockets.unfinishedMessages.delivered(on: descriptor) }
            }
            // An envelope, and a stream chunk's payload.
            guard let frames = received else {
                noteMalformed(bus: false, "a message of more than 2 frames from the originator at \(endpoint)")
                continue
            }
            do {
                // A stream frame comes alone (a chunk's, a credit's) or in its envelope (the rarer
                // kinds, and traced ones); either goes to its pair.
                let frame: WireStreamFrame
                switch try frames[0].replyEnvelope(strings: sockets.peerStrings) {
                case .activityReply(let correlationID, let activity):
                    resolve(correlationID, .success(.activity(activity)))
                    continue
                case .streamFrame(let alone): frame = alone
                case .other(let envelope):
                    guard case .streamFrame(let inEnvelope) = envelope.body else {
                        resolve(envelope.correlationID, .success(.envelope(envelope)))
                        continue
                    }
                    frame = inEnvelope
                }
                handleStreamFrame(frame, payload: frames.count > 1 ? frames[1] : nil, from: .dealer(endpoint), owner: endpoint)
            } catch {
                noteMalformed(bus: false, "a reply from \(endpoint) that is not an envelope: \(error)")
            }
        }
    }

    /// Fails requests to an originator whose connection drops, instead of letting them time out.
    func watchConnection(to endpoint: String, client identity: ObjectIdentifier) async {
        while let client = sockets.clients[endpoint], ObjectIdentifier(client) == identity, !Task.isCancelled {
            let event: MonitorEvent?
            do {
                event = try await client.monitor.next(matching: Client.watchedEvents, timeout: .seconds(60))
            } catch { return }
            guard let event else { continue }
            if event.kind == .connected {
                sockets.unfinishedMessages.watch(event, on: client.socket)
                continue
            }
            // The connection is whole (with ZMQ_IMMEDIATE, the DEALER takes messages for it only
            // now): interrupted pairs resume at once.
            if event.kind == .handshakeSucceeded {
                resumeStreams(to: endpoint)
                continue
            }
            switch client.connection.observe(event.kind) {
            case .reconnectFailed:
                reconnectFailed(to: endpoint, client: identity)
            case .refused:
                own.logger.warning("the originator at \(endpoint) refused the CURVE handshake (\(event.kind)): this node's key is not in its account, or the key it advertised is not its own")
            case .dropped:
                resume(continuing.disconnected(from: endpoint))
                interruptStreams(to: endpoint)
            }
        }
    }

    /// Closes DEALERs to originators this node no longer has any reason to talk to (``OriginConnection/unused(_:pending:awaited:pairs:knownEndpoints:)``).
    func pruneClients() {
        let unused = OriginConnection.unused(
            sockets.clients.keys, pending: continuing.pending.endpoints,
            awaited: sockets.clients.lazy.filter { $0.value.connection.waits > 0 }.map(\.key), pairs: streams.dealerEndpoints,
            knownEndpoints: follower.known.values.lazy.map(\.activity.continueEndpoint))
        for endpoint in unused {
            sockets.clients.removeValue(forKey: endpoint)?.close()
        }
    }
}
