import Foundation
import Progression
import ProgressionTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A real full disk: the database on a small tmpfs that a test fills up and then frees, under a real worker process.
/// Mounting needs root (and a kernel that lets the container mount tmpfs): elsewhere the test does not run.
struct DiskFullTests {
    /// A tmpfs of `megabytes` mounted on a new directory, unmounted when released.
    final class SmallFileSystem {
        let path: String

        init?(megabytes: Int) {
            path = NSTemporaryDirectory() + "progression-tmpfs-" + UUID().uuidString
            guard mkdir(path, 0o700) == 0 else { return nil }
            let mounted = Process()
            mounted.executableURL = URL(fileURLWithPath: "/bin/mount")
            mounted.arguments = ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", path]
            mounted.standardError = FileHandle.nullDevice
            guard (try? mounted.run()) != nil else {
                rmdir(path)
                return nil
            }
            mounted.waitUntilExit()
            guard mounted.terminationStatus == 0 else {
                rmdir(path)
                return nil
            }
        }

        deinit {
            let unmount = Process()
            unmount.executableURL = URL(fileURLWithPath: "/bin/umount")
            unmount.arguments = ["-l", path]
            try? unmount.run()
            unmount.waitUntilExit()
            rmdir(path)
        }

        /// Writes a file until the file system is full; returns its path.
        func fill() -> String {
            let filler = path + "/filler"
            let descriptor = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            defer { close(descriptor) }
            let chunk = [UInt8](repeating: 0x55, count: 16_384)
            while chunk.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) > 0 {}
            return filler
        }
    }

    static let canMount: Bool = {
        guard getuid() == 0, let probe = SmallFileSystem(megabytes: 1) else { return false }
        _ = probe
        return true
    }()

    /// Issue 15, faults 1 and 2: while the disk is full the worker's jobs wait (it says so), none fails, none is left
    /// stuck; once space is freed they complete, no committed step runs again, and the file is sound.
    @Test(.enabled(if: canMount, "needs root and a kernel that allows mounting tmpfs"))
    func aFullDiskFailsNoJobAndTheJobsCompleteOnceSpaceIsFreed() async throws {
        let disk = try #require(SmallFileSystem(megabytes: 16))
        let directory = try TemporaryDirectory()
        let db = disk.path + "/tasks.sqlite"
        let ledger = LedgerFile(path: directory.file("ledger.txt"))
        let worker = try WorkerProcess(
            db: db, ledger: ledger.path,
            [
                "--submit-batch", "12", "--iterations", "600", "--delay", "10", "--concurrency", "4", "--exit-when-idle",
                "--iterate-until-storage-fails",
            ])
        // The disk fills up while the jobs run. Their writes fail once the write-ahead log must grow past the size it
        // had (a checkpoint into a database that cannot grow fails first, silently): that takes seconds of progress
        // writes, more on a loaded machine, so the jobs go on iterating until their worker has seen a write fail
        // (once, in a loaded parallel run, 600 iterations ended before that and the worker went idle).
        try await waitUntil("the jobs to run", timeout: .seconds(120)) { ledger.lines.contains { $0.hasPrefix("iter ") } }
        let filler = disk.fill()
        try await waitUntil("the worker to see the full disk", timeout: .seconds(300)) {
            ledger.lines.contains("storage failing")
        }
        var readOnly = SQLiteTaskStore.Configuration()
        readOnly.readOnly = true
        let store = try SQLiteTaskStore(path: db, configuration: readOnly)
        #expect(try await store.roots(TaskQuery(statuses: [.failed, .cancelled])).isEmpty, "no job failed of it")
        unlink(filler)
        #expect(try await worker.waitForExit(timeout: .seconds(240)) == 0)
        #expect(ledger.lines.contains("storage healthy"))
        let roots = try await store.roots(TaskQuery(limit: 100))
        #expect(roots.count == 12 && roots.allSatisfy { $0.status == .completed }, "\(roots.map(\.status))")
        #expect(try await store.integrityCheck() == ["ok"])
        // No step ran twice (the worker was never killed: a step runs once).
        let begins = ledger.lines.filter { $0.hasPrefix("begin ") }
        #expect(Set(begins).count == begins.count, "\(begins.count - Set(begins).count) steps ran twice")
        await store.close()
    }
}
