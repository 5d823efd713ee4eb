import Foundation

/// Where two byte strings first differ, in words, or nil when they are the same. For expectations
/// on large payloads: `#expect(a == b)` on two `Data` makes swift-testing compute a diff of them
/// when they differ, which for megabytes runs for hours (a CI run once hung on a 20 MiB image).
public func byteDifference(_ got: Data, _ expected: Data) -> String? {
    guard got != expected else { return nil }
    let first = zip(got, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(got.count, expected.count)
    return "got \(got.count) bytes, expected \(expected.count); the first difference at byte \(first)"
}
