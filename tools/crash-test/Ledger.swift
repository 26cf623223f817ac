import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// An append-only file of side effects, one line each. Lines are written with `O_APPEND` in one `write`, so a process
/// killed at any moment leaves whole lines (the kernel keeps what was written, even without fsync).
struct Ledger: Sendable {
    let path: String

    func append(_ line: String) {
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }

    func lines() -> [Substring] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n")
    }
}
