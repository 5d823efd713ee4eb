import Foundation
import Testing

@Suite("The README's examples compile")
struct ReadmeExamplesTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The lines of each ```swift block, trimmed, without blank and import lines (ReadmeExamples.swift
    /// has its imports at the top).
    static func swiftBlocks(of markdown: String) -> [[String]] {
        var blocks: [[String]] = []
        var current: [String]?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line.hasPrefix("```swift") {
                current = []
            } else if current != nil, line.hasPrefix("```") {
                blocks.append(current!)
                current = nil
            } else if current != nil {
                current!.append(line.trimmingCharacters(in: .whitespaces))
            }
        }
        return blocks.map { $0.filter { !$0.isEmpty && !$0.hasPrefix("import ") } }
    }

    @Test("every ```swift block of README.md is in ReadmeExamples.swift, line for line, so the compiler checks it")
    func everyBlockIsCompiled() throws {
        let readme = try String(contentsOf: Self.repository.appendingPathComponent("README.md"), encoding: .utf8)
        let examples = try String(contentsOf: Self.repository.appendingPathComponent("Tests/HandoffTests/ReadmeExamples.swift"), encoding: .utf8)
            .split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        let blocks = Self.swiftBlocks(of: readme)
        #expect(blocks.count >= 7, "the README has fewer Swift examples than it had: remove their copies from ReadmeExamples.swift too")
        for block in blocks {
            let found = examples.indices.contains { start in
                start + block.count <= examples.count && Array(examples[start..<start + block.count]) == block
            }
            #expect(found, "this README example is not in Tests/HandoffTests/ReadmeExamples.swift as written:\n\(block.joined(separator: "\n"))")
        }
    }
}
