import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One entry of the walked tree that the job will read: a regular file, a symbolic link (followed), or something
/// that is not a regular file (a FIFO, a socket, a dangling link) whose step will fail, naming it.
struct FileEntry: Sendable, Hashable {
    /// The path relative to the walked directory, with `/` separators: the step's name and the manifest's key.
    var path: String
    var absolutePath: String
    /// The size when known (0 for entries that cannot be read).
    var bytes: Int64

    /// The relative folder the file is in, `.` for the top.
    var folder: String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return String(path[..<slash])
    }
}

/// The directory cannot be walked (missing, not a directory, unreadable).
struct DirectoryError: Error, Sendable, LocalizedError, CustomStringConvertible {
    var path: String
    var reason: String

    var errorDescription: String? { description }
    var description: String { "cannot read the directory '\(path)': \(reason)" }
}

/// Lists the files below a directory, sorted by relative path. Does not follow links to directories (no loops).
enum DirectoryWalker {
    /// - Parameter excluding: an absolute path to leave out (the manifest, when it is written inside the tree).
    /// - Throws: ``DirectoryError`` when `directory` or a folder below it cannot be listed.
    static func files(in directory: String, excluding: String? = nil) throws -> [FileEntry] {
        var info = stat()
        guard stat(directory, &info) == 0 else {
            throw DirectoryError(path: directory, reason: String(cString: strerror(errno)))
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw DirectoryError(path: directory, reason: "not a directory")
        }
        var entries: [FileEntry] = []
        try walk(directory, relative: "", excluding: excluding, into: &entries)
        return entries.sorted { $0.path < $1.path }
    }

    private static func walk(_ directory: String, relative: String, excluding: String?, into entries: inout [FileEntry]) throws {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw DirectoryError(path: directory, reason: (error as NSError).localizedDescription)
        }
        for name in names.sorted() {
            let absolute = directory + "/" + name
            let relativePath = relative.isEmpty ? name : relative + "/" + name
            if absolute == excluding { continue }
            var info = stat()
            guard lstat(absolute, &info) == 0 else {
                entries.append(FileEntry(path: relativePath, absolutePath: absolute, bytes: 0))
                continue
            }
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                try walk(absolute, relative: relativePath, excluding: excluding, into: &entries)
            case S_IFREG:
                entries.append(FileEntry(path: relativePath, absolutePath: absolute, bytes: Int64(info.st_size)))
            case S_IFLNK:
                var target = stat()
                if stat(absolute, &target) == 0 {
                    if (target.st_mode & S_IFMT) == S_IFDIR { continue }  // no loops through linked folders
                    entries.append(FileEntry(path: relativePath, absolutePath: absolute, bytes: Int64(target.st_size)))
                } else {
                    // A dangling link: listed, so that its step fails and the failure is reported.
                    entries.append(FileEntry(path: relativePath, absolutePath: absolute, bytes: 0))
                }
            default:
                // A FIFO, a socket, a device: listed; its step fails with "not a regular file".
                entries.append(FileEntry(path: relativePath, absolutePath: absolute, bytes: 0))
            }
        }
    }
}
