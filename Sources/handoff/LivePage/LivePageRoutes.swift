import ArgumentParser
import Foundation
import Handoff
import Hummingbird
import HummingbirdCore
import NIOCore

/// Who may load the live page.
enum LivePageAccess: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// Only clients on this machine (the default): the page shows every node and activity title.
    case loopback
    /// Anyone who reaches the `--metrics` address.
    case anywhere
    /// No page: `/metrics` and `/healthz` only.
    case off
}

/// The request context of the `--metrics` server: Hummingbird's, with the client's address (the
/// live page answers loopback clients only, unless told otherwise).
struct ServerRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }

    /// Whether the client is on this machine.
    var isLoopback: Bool {
        guard let ip = remoteAddress?.ipAddress else { return false }
        return ip.hasPrefix("127.") || ip == "::1" || ip.hasPrefix("::ffff:127.")
    }
}

/// The live page of the bus (`/`), its data (`/view.json`, one snapshot) and its updates
/// (`/events`, server-sent events: a snapshot a second), served where `--metrics` serves.
enum LivePage {
    static func addRoutes(to router: Router<ServerRequestContext>, observer: BusObserver, access: LivePageAccess) {
        guard access != .off else { return }
        @Sendable func refused(_ context: ServerRequestContext) -> Response? {
            guard access == .loopback, !context.isLoopback else { return nil }
            return Response(
                status: .forbidden, headers: [.contentType: "text/plain; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: "the live page answers clients on this machine only (the process runs with --live-page loopback; --live-page anywhere opens it)\n")))
        }
        router.get("/") { _, context -> Response in
            if let refusal = refused(context) { return refusal }
            return Response(
                status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: LivePageDocument.html)))
        }
        router.get("view.json") { _, context -> Response in
            if let refusal = refused(context) { return refusal }
            let snapshot = await observer.snapshot()
            return Response(
                status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: try Self.encoder.encode(snapshot))))
        }
        router.get("events") { _, context -> Response in
            if let refusal = refused(context) { return refusal }
            let updates = await observer.updates()
            return Response(
                status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-store"],
                body: ResponseBody { writer in
                    // Ends when the client goes away (the write throws) or the process stops.
                    for await snapshot in updates {
                        var event = ByteBuffer(string: "data: ")
                        event.writeBytes(try Self.encoder.encode(snapshot))
                        event.writeString("\n\n")
                        try await writer.write(event)
                    }
                    try await writer.finish(nil)
                })
        }
    }

    /// As every --json line writes (`jsonEncoder()`).
    static let encoder = jsonEncoder()
}
