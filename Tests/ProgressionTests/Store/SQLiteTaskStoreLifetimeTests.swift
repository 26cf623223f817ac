import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// A released store closes its database: no file stays open.
struct SQLiteTaskStoreLifetimeTests {
    @Test func storesCloseTheirFilesWhenReleased() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("leak.sqlite")
        // Descriptors of this test's database only: other tests open files meanwhile.
        func openFiles() -> Int {
            let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            return descriptors.filter { descriptor in
                let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + descriptor)
                return target?.hasPrefix(path) ?? false
            }.count
        }
        _ = try await SQLiteTaskStore(path: path).roots(TaskQuery())
        let before = openFiles()
        for _ in 0..<20 {
            _ = try await SQLiteTaskStore(path: path).roots(TaskQuery())
        }
        // A released store's connections close on their own threads: waited for, not slept on.
        let closed = await eventually(timeout: .seconds(120)) { openFiles() - before == 0 }
        #expect(closed, "\(openFiles() - before) files left open by 20 released stores")
    }
}
