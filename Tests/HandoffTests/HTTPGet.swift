import Foundation
import Glibc

/// One HTTP/1.1 GET over a plain TCP connection to a loopback server: its status and body. The
/// metrics tests need nothing more, and this needs no HTTP client library.
func httpGet(host: String = "127.0.0.1", port: Int, path: String, timeout: Duration = .seconds(5)) throws -> (status: Int, body: String) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw ProcessFailure("socket: errno \(errno)") }
    defer { close(fd) }
    var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { throw ProcessFailure("not an IPv4 address: \(host)") }
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { throw ProcessFailure("connect to \(host):\(port): errno \(errno)") }
    let request = Array("GET \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\n\r\n".utf8)
    guard send(fd, request, request.count, 0) == request.count else { throw ProcessFailure("send: errno \(errno)") }
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let count = recv(fd, &buffer, buffer.count, 0)
        if count < 0 { throw ProcessFailure("recv from \(host):\(port): errno \(errno)") }
        if count == 0 { break }
        response += buffer[..<count]
    }
    let text = String(decoding: response, as: UTF8.self)
    guard let headerEnd = text.range(of: "\r\n\r\n"), let statusLine = text.split(separator: "\r\n").first,
          let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") else {
        throw ProcessFailure("not an HTTP response from \(host):\(port)\(path): \(text.prefix(200))")
    }
    let headers = text[..<headerEnd.lowerBound].lowercased()
    var body = String(text[headerEnd.upperBound...])
    if headers.contains("transfer-encoding: chunked") { body = dechunk(body) }
    return (status, body)
}

/// The body of a chunked HTTP response, its chunks joined.
private func dechunk(_ chunked: String) -> String {
    var bytes = Substring(chunked).utf8[...]
    var body: [UInt8] = []
    while let lineEnd = bytes.firstRange(of: "\r\n".utf8) {
        guard let size = Int(String(decoding: bytes[..<lineEnd.lowerBound], as: UTF8.self), radix: 16), size > 0 else { break }
        let start = lineEnd.upperBound
        let end = bytes.index(start, offsetBy: size)
        body += bytes[start..<end]
        bytes = bytes[bytes.index(end, offsetBy: 2)...]
    }
    return String(decoding: body, as: UTF8.self)
}

/// The value of one sample of a Prometheus text exposition (`name{labels} value`), or nil.
func metricValue(_ exposition: String, _ sample: String) -> Double? {
    for line in exposition.split(separator: "\n") where !line.hasPrefix("#") {
        guard let space = line.lastIndex(of: " "), line[..<space] == sample else { continue }
        return Double(line[line.index(after: space)...])
    }
    return nil
}
