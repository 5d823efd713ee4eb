import Foundation

/// How many file descriptors this process has open, read from `/proc/self/fd`.
///
/// Each entry is counted by its type (a descriptor is a link there, `.` and `..` are folders), and
/// no entry's name is read. Swift's Foundation (6.3.1 here) lists the same folder in
/// `Process.run()` by copying each entry's whole 256-byte `d_name`, past the end of a short entry:
/// with more than about 1,360 descriptors open, glibc fills its 32 KiB read buffer to the end, and
/// the copy of its last entry reads beyond it, a crash when the next page is unmapped
/// (swift-corelibs-foundation#5472; CI's one-loop pass crashed so on 2026-12-06, while a test held
/// 2,000 DEALERs open and another started a process). Counting by name the same way would share it.
public enum OpenDescriptors {
    /// The count, the descriptor that lists the folder included (as client_golang counts it), or
    /// `nil` where `/proc` cannot be read.
    public static func count() -> Int? {
        guard let folder = opendir("/proc/self/fd") else { return nil }
        defer { closedir(folder) }
        var count = 0
        while let entry = readdir(folder) {
            if entry.pointee.d_type == UInt8(DT_LNK) { count += 1 }
        }
        return count
    }
}
