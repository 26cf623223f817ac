import Foundation

#if canImport(Glibc)
import Glibc
private let systemRead = Glibc.read
#elseif canImport(Darwin)
import Darwin
private let systemRead = Darwin.read
#endif

/// A file cannot be read: its relative path and why (the system's words). The step of that file fails with it.
struct FileReadError: Error, Sendable, LocalizedError, CustomStringConvertible {
    var path: String
    var reason: String

    var errorDescription: String? { description }
    var description: String { "cannot read '\(path)': \(reason)" }
}

/// Reads a file in fixed-size chunks with plain POSIX calls, from a given offset.
///
/// ```swift
/// let reader = try ChunkedFileReader(path: "/data/a.txt", displayName: "a.txt", chunkSize: 1 << 20)
/// defer { reader.close() }
/// while let count = try reader.read({ chunk in digest.update(chunk) }), count > 0 { … }
/// ```
final class ChunkedFileReader {
    private let descriptor: Int32
    private let displayName: String
    private let buffer: UnsafeMutableRawBufferPointer

    /// Opens `path` for reading, positioned at `offset`.
    ///
    /// - Throws: ``FileReadError`` naming `displayName` when the file cannot be opened, is not a regular file (a FIFO
    ///   would block), or the offset cannot be reached.
    init(path: String, displayName: String, chunkSize: Int, offset: Int64 = 0) throws {
        self.displayName = displayName
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { throw FileReadError(path: displayName, reason: Self.lastError()) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let reason = Self.lastError()
            close(descriptor)
            throw FileReadError(path: displayName, reason: reason)
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            close(descriptor)
            throw FileReadError(path: displayName, reason: "not a regular file")
        }
        if offset > 0, lseek(descriptor, off_t(offset), SEEK_SET) < 0 {
            let reason = Self.lastError()
            close(descriptor)
            throw FileReadError(path: displayName, reason: reason)
        }
        self.descriptor = descriptor
        self.buffer = .allocate(byteCount: chunkSize, alignment: 16)
    }

    deinit {
        buffer.deallocate()
        close(descriptor)
    }

    /// Reads the next chunk and hands it to `body`; returns the number of bytes read, 0 at the end of the file.
    func read(_ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Int {
        while true {
            let count = systemRead(descriptor, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw FileReadError(path: displayName, reason: Self.lastError())
            }
            try body(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            return count
        }
    }

    private static func lastError() -> String {
        String(cString: strerror(errno))
    }
}
