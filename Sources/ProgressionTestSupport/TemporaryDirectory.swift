import Foundation

/// A directory of its own for one test, removed with everything in it when the last reference to it goes.
///
/// ```swift
/// let directory = try TemporaryDirectory()
/// let store = try SQLiteTaskStore(path: directory.file("tasks.sqlite"))
/// ```
public final class TemporaryDirectory: Sendable {
    /// The directory's absolute path.
    public let path: String

    /// Creates a new, empty directory under the system's temporary directory.
    ///
    /// - Throws: The file system's error when the directory cannot be created.
    public init() throws {
        path = FileManager.default.temporaryDirectory.path + "/progression-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit {
        // Read-only modes set by a test would stop the removal.
        chmod(path, 0o755)
        try? FileManager.default.removeItem(atPath: path)
    }

    /// The directory as a file URL.
    public var url: URL { URL(fileURLWithPath: path, isDirectory: true) }

    /// The path of `name` in the directory (which need not exist).
    public func file(_ name: String) -> String { path + "/" + name }
}
