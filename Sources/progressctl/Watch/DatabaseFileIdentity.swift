import Foundation
import ProgressionOperator

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Which file a path named when the database was opened (device and inode), to notice when it is deleted or
/// replaced under a process that keeps it open: SQLite goes on reading the unlinked file and never says so.
struct DatabaseFileIdentity: Sendable, Hashable {
    let path: String
    private let device: UInt64
    private let inode: UInt64

    /// The identity of the file at `path` now.
    ///
    /// - Throws: ``CLIError`` when there is no file at `path`.
    init(path: String) throws {
        var info = stat()
        guard stat(path, &info) == 0 else { throw CLIError("no database at '\(path)'") }
        self.path = path
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    /// Checks that `path` still names the same file.
    ///
    /// - Throws: ``CLIError`` "the database '…' was deleted" (or "replaced") "while watching".
    func check() throws {
        var info = stat()
        guard stat(path, &info) == 0 else {
            let error = errno
            if error == ENOENT { throw CLIError("the database '\(path)' was deleted while watching") }
            throw CLIError("the database '\(path)' can no longer be read: \(String(cString: strerror(error)))")
        }
        guard UInt64(info.st_dev) == device, UInt64(info.st_ino) == inode else {
            throw CLIError("the database '\(path)' was replaced by another file while watching")
        }
    }
}
