import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// The store's write-ahead log: checkpointed off the commit path while work comes, truncated once the executor is idle.
struct WriteAheadLogTests {
    private static func size(_ path: String) -> Int {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    }

    @Test(.timeLimit(.minutes(5)))
    func anIdleExecutorLeavesAnEmptyLogAndTheDatabaseHoldsEverything() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("wal.sqlite")
        let store = try SQLiteTaskStore(path: path)
        var configuration = TaskExecutor.Configuration()
        configuration.checkpointInterval = .milliseconds(50)
        let executor = TaskExecutor(store: store, configuration: configuration)
        try await executor.start()
        var ids: [String] = []
        for index in 0..<300 {
            ids.append(try await executor.addTask(name: "task-\(index)") { context in
                try await context.report(.progress(0.5))
            })
        }
        for id in ids { await executor.waitForTask(id) }
        try await executor.flush()
        #expect(Self.size(path + "-wal") > 0, "the commits went to the log")

        // Nothing changes any more: within a few checkpoint intervals the log is copied back and truncated.
        #expect(await eventually(timeout: .seconds(120)) { Self.size(path + "-wal") == 0 })
        // With the log empty, another connection reads everything from the database file itself.
        var readOnly = SQLiteTaskStore.Configuration()
        readOnly.readOnly = true
        let reader = try SQLiteTaskStore(path: path, configuration: readOnly)
        #expect(try await reader.countRoots(TaskQuery(statuses: [.completed])) == 300)
        await reader.close()
        await executor.shutdown()
        await store.close()
    }
}
