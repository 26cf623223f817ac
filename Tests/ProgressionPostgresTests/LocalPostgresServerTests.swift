#if PostgreSQL
import Foundation
import ProgressionPostgresTestSupport
import ProgressionTestSupport
import Testing

/// The tests' own server must not hold what the tests open: it and its watchdog live as long as the test process.
@Suite struct LocalPostgresServerTests {
    /// The inode of a pipe's end, as `/proc/<pid>/fd` names it (`pipe:[inode]`).
    static func pipeName(_ handle: FileHandle) -> String {
        var status = stat()
        fstat(handle.fileDescriptor, &status)
        return "pipe:[\(status.st_ino)]"
    }

    /// The processes whose command line names `text`, and whether each holds `descriptor` (a `/proc/<pid>/fd` link).
    static func processes(naming text: String, holding descriptor: String) -> [(pid: Int32, holds: Bool)] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> (Int32, Bool)? in
            guard let pid = Int32(entry),
                let command = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"),
                String(decoding: command, as: UTF8.self).contains(text)
            else { return nil }
            let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
            let holds = descriptors.contains { fd in
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) == descriptor
            }
            return (pid, holds)
        }
    }

    /// A pipe the test process holds while the server starts is in neither the server's processes nor its watchdog:
    /// the watchdog once held the writing end of a prune test's pipe, whose reader then waited for its end of input
    /// for ever, and the test with it, blocking a thread of the two-thread pool and starving the whole run.
    @Test func theServerAndItsWatchdogInheritNoDescriptorOfTheTests() async throws {
        // Foundation's pipe: inheritable, as a test's descriptors may be.
        let pipe = Pipe()
        let server = try await LocalPostgresServer.make(durable: false)
        defer { try? server.stop(.immediate) }
        let name = Self.pipeName(pipe.fileHandleForWriting)
        let spawned = Self.processes(naming: server.directory, holding: name)
        // The postmaster and its children (`-D <directory>/data`), and the watchdog's shell (`pg_ctl -D <directory>…`).
        #expect(spawned.count >= 2, "the server's processes and its watchdog are found")
        #expect(spawned.filter(\.holds).isEmpty, "\(spawned.filter(\.holds).map(\.pid)) hold the test's pipe")
        // The check can see a holder: this process holds the pipe (kept open to here).
        withExtendedLifetime(pipe) {
            let own = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            #expect(own.contains { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == name })
        }
    }
}
#endif
