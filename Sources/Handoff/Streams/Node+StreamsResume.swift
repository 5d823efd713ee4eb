import Foundation
import HandoffWire
import Logging

// Continuation streams: picking a pair up again after its connection broke (stream.proto, "Resume").
extension Node {
    /// The originator's side of a resume: finds the pair by id and token (the new connection has a
    /// new routing id) and moves it there; its machine answers with what it has and sends again
    /// what the peer lacks.
    func resumeAsOriginator(_ resume: WireStreamResume, route: StreamRoute) {
        let session: StreamSession
        switch streams.resumeTarget(id: route.id, token: resume.resumeToken, node: own.info.name, resumeWindow: own.configuration.streamResumeWindow) {
        case .success(let found):
            session = found
        case .failure(let error):
            var frame = WireStreamFrame()
            frame.streamID = route.id
            frame.error = error.wire
            sendFrame(frame, to: route.peer, payload: nil)
            return
        }
        streams.move(session, to: route)
        perform(session.pair.resumeRequested(resume, now: .now), on: session)
    }

    /// The connection to an originator is back: its interrupted pairs ask to resume at once.
    func resumeStreams(to endpoint: String) {
        for session in streams.live(toDealer: endpoint) {
            perform(session.pair.connectionReturned(now: .now), on: session)
        }
    }

    /// Marks the pairs with an originator whose connection dropped as interrupted: they resume when
    /// it is back (the DEALER reconnects by itself).
    func interruptStreams(to endpoint: String) {
        for session in streams.live(toDealer: endpoint) {
            let unanswered = HandoffError(.connectionUnavailable, "the originator at \(endpoint) disconnected before answering the open", activityType: session.activityType)
            let (actions, interruptedNow) = session.pair.connectionDropped(failingOpenWith: unanswered, now: .now)
            if interruptedNow {
                own.logger.info("streams \(session.route.id): the connection to \(endpoint) dropped; resuming when it is back")
            }
            perform(actions, on: session)
        }
    }
}
