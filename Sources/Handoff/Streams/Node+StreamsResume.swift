import DequeModule
import Foundation
import HandoffWire
import Logging
import SwiftProtobuf
import ZeroMQ

// Continuation streams: picking a pair up again after its connection broke (stream.proto, "Resume").
extension Node {
    // MARK: Resuming

    /// The originator's side of a resume: finds the pair by id and token (the new connection has a
    /// new routing id), moves it there, answers with what it has, and sends again what the peer lacks.
    func resumeAsOriginator(_ resume: WireStreamResume, route: StreamRoute) {
        guard let session = streams.resumable(id: route.id, token: resume.resumeToken) else {
            var frame = WireStreamFrame()
            frame.streamID = route.id
            frame.error = HandoffError(.peerLost, "\(own.info.name) has no stream pair \(route.id) to resume: it ended, or its resume window (\(own.configuration.streamResumeWindow)) passed").wire
            sendFrame(frame, to: route.peer, payload: nil)
            return
        }
        streams.move(session, to: route)
        if session.interruptedSince != nil {
            own.logger.info("streams \(route.id) resumed by the continuing node: it had \(resume.receivedOffset) bytes, this node \(session.receivedOffset)")
        }
        session.interruptedSince = nil
        session.lastHeard = .now
        var answer = WireStreamResume()
        answer.resumeToken = session.resumeToken
        answer.receivedOffset = session.receivedOffset
        answer.window = UInt32(session.resumeGrant())
        answer.endReceived = session.reads && session.endReceived
        sendStreamMessage(session, .resume(answer))
        applyResume(resume, to: session)
    }

    /// Sends again, from what the peer says it has, what this side had written beyond it.
    func applyResume(_ resume: WireStreamResume, to session: StreamSession) {
        session.resumes += 1
        observability.streamCounters.resumed += 1
        session.rewind(to: resume.receivedOffset, credit: Int(resume.window), endReceived: resume.endReceived)
        pump(session)
        removeIfDone(session)
    }

    /// The continuing side asks the originator to pick the pair up again, with what it has.
    func sendResume(_ session: StreamSession, now: ContinuousClock.Instant) {
        var resume = WireStreamResume()
        resume.resumeToken = session.resumeToken
        resume.receivedOffset = session.receivedOffset
        resume.window = UInt32(session.resumeGrant())
        resume.endReceived = session.reads && session.endReceived
        session.lastResumeSent = now
        if case .dealer(let endpoint) = session.route.peer, sockets.clients[endpoint] == nil {
            // The client was closed (pruned, or dropped): connect again.
            do { _ = try client(for: endpoint, serverKey: session.originKey) } catch {
                own.logger.debug("streams \(session.route.id): cannot reconnect to \(endpoint): \(error)")
                return
            }
        }
        sendStreamMessage(session, .resume(resume))
    }

    /// Marks the pairs with an originator whose connection dropped as interrupted: they resume when
    /// it is back (the DEALER reconnects by itself).
    func interruptStreams(to endpoint: String) {
        for session in streams.live(toDealer: endpoint) {
            if session.openWaiter != nil {
                session.fail(HandoffError(.connectionUnavailable, "the originator at \(endpoint) disconnected before answering the open", activityType: session.activityType))
            } else if session.interruptedSince == nil {
                own.logger.info("streams \(session.route.id): the connection to \(endpoint) dropped; resuming when it is back")
                session.interruptedSince = .now
            }
        }
    }
}
