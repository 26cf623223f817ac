import Foundation

/// A fresh temporary directory for one scenario run, holding its database file (and its -wal and -shm files).
/// ``remove()`` deletes it with everything in it.
struct ScratchDirectory: Sendable {
    let path: String

    /// Creates `$TMPDIR/progression-bench-<uuid>`.
    ///
    /// - Throws: when the directory cannot be created.
    init() throws {
        path = NSTemporaryDirectory() + "/progression-bench-" + UUID().uuidString.lowercased()
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// The path of a file in the directory.
    func file(_ name: String) -> String { path + "/" + name }

    /// Deletes the directory and its files.
    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}
