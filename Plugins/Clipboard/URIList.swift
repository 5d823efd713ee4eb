import Foundation

/// `text/uri-list` (RFC 2483), as file managers copy files: one URI a line, `#` comments.
enum URIList {
    static let mimeType = "text/uri-list"

    /// The local files a list names, when every URI in it is a `file://` one on this host (no
    /// host, `localhost`, or this host's name); nil otherwise (a list of web links is text).
    static func files(in content: Data, hostName: String = ProcessInfo.processInfo.hostName) -> [URL]? {
        let lines = String(decoding: content, as: UTF8.self)
            .split(whereSeparator: \.isNewline)  // (CRLF is one Character)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
        guard !lines.isEmpty else { return nil }
        var files: [URL] = []
        for line in lines {
            guard let url = URL(string: line), url.scheme == "file", !url.path.isEmpty else { return nil }
            let host = url.host ?? ""
            guard host.isEmpty || host == "localhost" || host == hostName else { return nil }
            files.append(URL(fileURLWithPath: url.path))
        }
        return files
    }

    /// A list of these files (CRLF-separated, as RFC 2483 writes it).
    static func make(_ files: [URL]) -> Data {
        Data(files.map { $0.standardizedFileURL.absoluteString + "\r\n" }.joined().utf8)
    }

    /// "3 files: report.pdf, photo.jpg, notes": what a copy of files is called in its offer.
    static func summary(of names: [String]) -> String {
        let shown = names.prefix(3).joined(separator: ", ") + (names.count > 3 ? ", …" : "")
        return names.count == 1 ? "1 file: \(shown)" : "\(names.count) files: \(shown)"
    }
}
