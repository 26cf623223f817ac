import Foundation
import Progression

/// The job's output: one line per file, sorted by relative path, tab-separated — path, bytes, lines, words, FNV-1a 64
/// checksum; a file that could not be read has `-` for its numbers and `ERROR <why>` for its checksum. The same
/// directory contents always give the same bytes (no dates, no absolute paths).
///
/// Every line is one record of 5 fields whatever the file names: in the path and the error text a backslash is written
/// `\\`, a tab `\t`, a newline `\n`, a carriage return `\r`, ESC `\e`, another control character `\x07`-style (C1
/// controls, line separators and bidirectional overrides `\u{202E}`-style); see `String.escapedForTSVField`.
///
/// ```
/// # path	bytes	lines	words	fnv1a64
/// letters/letter-0001.txt	1020041	11340	209195	f34b76ea6ebdd346
/// broken-link.txt	-	-	-	ERROR cannot read 'broken-link.txt': No such file or directory
/// ```
struct Manifest: Sendable {
    var results: [FileResult]

    var text: String {
        var lines = ["# path\tbytes\tlines\twords\tfnv1a64"]
        for result in results.sorted(by: { $0.path < $1.path }) {
            let path = result.path.escapedForTSVField
            if let error = result.error {
                lines.append("\(path)\t-\t-\t-\tERROR \(error.escapedForTSVField)")
            } else {
                lines.append("\(path)\t\(result.bytes)\t\(result.lines)\t\(result.words)\t\(result.checksum)")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Writes the manifest atomically (a temporary file renamed over the old one).
    ///
    /// - Throws: ``ManifestPathError`` when `path` names something that is not a regular file (a device such as
    ///   `/dev/null`, a pipe, a directory): a rename would replace it with a file.
    func write(to path: String) throws {
        try Self.checkWritable(path)
        try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    /// Throws unless a manifest may be written at `path`: nothing there yet, or a regular file (a symbolic link is
    /// judged by what it points to, which is left as it is: the rename replaces the link).
    static func checkWritable(_ path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }  // nothing there: created
        if (info.st_mode & S_IFMT) == S_IFLNK {
            throw ManifestPathError(path: path, what: "a symbolic link (give the path it points to)")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            let what: String =
                switch info.st_mode & S_IFMT {
                case S_IFDIR: "a directory"
                case S_IFCHR, S_IFBLK: "a device"
                case S_IFIFO: "a pipe"
                case S_IFSOCK: "a socket"
                default: "not a regular file"
                }
            throw ManifestPathError(path: path, what: what)
        }
    }
}

/// A manifest path that names something a manifest must not replace.
struct ManifestPathError: NonRetryableError, LocalizedError, CustomStringConvertible {
    var path: String
    var what: String

    var errorDescription: String? { description }
    var description: String {
        "the manifest path '\(path)' is \(what), not a regular file: a manifest is written to a new file renamed "
            + "into place, which would replace it"
    }
}
