import ArgumentParser
import Foundation
import Glibc
import Handoff

/// `handoff health HOST:PORT`: asks a broker's or agent's `/healthz` (of `--metrics`), for
/// container health checks and scripts that have no HTTP client.
struct HealthCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "health",
        abstract: "Ask a broker's or agent's health endpoint (its --metrics address): exit 0 when healthy, 1 when not or unreachable.")

    @Argument(help: ArgumentHelp("The --metrics address of the broker or agent, e.g. 127.0.0.1:9464 (or its URL, http://127.0.0.1:9464/).", valueName: "host:port"))
    var address: String
    @Option(help: "Seconds to wait for the answer.") var timeout: Double = 3
    @Flag(help: "One JSON object: healthy, status, reason.") var json = false

    func run() throws {
        let (host, port) = try MetricsOptions.parseServed(address)
        let answer: (status: Int, body: String)
        do {
            answer = try HealthProbe.get(host: host == "0.0.0.0" ? "127.0.0.1" : host, port: port, path: "/healthz", timeout: timeout)
        } catch {
            if json { print(#"{"healthy":false,"status":0,"reason":\#(JSONLogHandler.quote(error.message))}"#) }
            throw HandoffError(error.code, "\(address): \(error.message)", cause: error)
        }
        let reason = answer.body.trimmingCharacters(in: .whitespacesAndNewlines)
        if json {
            print(#"{"healthy":\#(answer.status == 200),"status":\#(answer.status),"reason":\#(JSONLogHandler.quote(reason))}"#)
        } else {
            print(reason)
        }
        if answer.status != 200 { throw ExitCode(1) }
    }
}

/// A blocking HTTP/1.1 GET of a small local resource, enough for a health check (and for
/// `top --from`, a live page's `/view.json`).
enum HealthProbe {
    static func get(host: String, port: Int, path: String, timeout: Double) throws(HandoffError) -> (status: Int, body: String) {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &found) == 0, let info = found else {
            throw HandoffError(.connectionUnavailable, "cannot resolve \(host)")
        }
        defer { freeaddrinfo(found) }
        let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
        guard fd >= 0 else { throw HandoffError(.connectionUnavailable, "socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var limit = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else {
            throw HandoffError(.connectionUnavailable, "nothing answers at \(host):\(port) (\(String(cString: strerror(errno))))")
        }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\n\r\n".utf8)
        guard send(fd, request, request.count, Int32(MSG_NOSIGNAL)) == request.count else {
            throw HandoffError(.connectionUnavailable, "could not send the request: \(String(cString: strerror(errno)))")
        }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        // Until the server closes, or the body's Content-Length has arrived (the answer is small:
        // a view of thousands of nodes is a few MiB).
        while response.count < 16 << 20 {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count < 0 { throw HandoffError(.remoteApplicationTimedOut, "no answer within \(timeout) s") }
            if count == 0 { break }
            response += buffer[..<count]
            if let (_, body, length) = split(response), let length, body.utf8.count >= length { break }
        }
        guard let (head, body, _) = split(response), let status = head.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap({ Int($0) }) else {
            throw HandoffError(.malformedMessage, "not an HTTP answer")
        }
        return (status, body)
    }

    /// The head and body of a response so far, and the body's declared length.
    private static func split(_ response: [UInt8]) -> (head: String, body: String, length: Int?)? {
        let text = String(decoding: response, as: UTF8.self)
        guard let end = text.range(of: "\r\n\r\n") else { return nil }
        let head = String(text[..<end.lowerBound])
        let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
        return (head, String(text[end.upperBound...]), length)
    }
}
