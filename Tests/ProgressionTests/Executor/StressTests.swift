import Foundation
import Progression
import ProgressionTestSupport
import Testing

struct StressTests {
    /// 500 roots with nested children, and four callers pausing, resuming, cancelling and retrying at random: every
    /// task reaches a final state, the last graph on the stream, the executor's memory and the store agree.
    @Test(arguments: StoreKind.allCases)
    func manyTasksUnderRandomControlAllFinishAndAgree(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(kind, in: directory)
        let options = TaskOptions.interactive.retryable()
        var ids: [String] = []
        for index in 0..<500 {
            let id = try await executor.addTask(name: "task \(index)", id: "task-\(index)", options: options) { context in
                for part in 0..<2 {
                    try await context.push("part \(part)") { child in
                        try await child.push("leaf") { leaf in
                            for step in 1...3 {
                                try await leaf.report(.step(step, of: 3))
                                await Task.yield()
                            }
                        }
                        try await child.report(.progress(1))
                    }
                    if index % 7 == 0 && part == 1 { throw CocoaLikeError.failed(index) }
                }
            }
            ids.append(id)
        }

        // Random control from several callers at once.
        let allIDs = ids
        try await withThrowingTaskGroup(of: Void.self) { group in
            for caller in 0..<4 {
                group.addTask {
                    var generator = SplitMix64(seed: UInt64(caller + 1))
                    for _ in 0..<300 {
                        let id = allIDs[Int.random(in: 0..<allIDs.count, using: &generator)]
                        do {
                            switch Int.random(in: 0..<4, using: &generator) {
                            case 0: try await executor.pause(taskID: id)
                            case 1: try await executor.resume(taskID: id)
                            case 2: try await executor.cancel(taskID: id)
                            default: try await executor.retry(taskID: id)
                            }
                        } catch is ProgressionError {
                            // Refused for the task's state: expected under random control.
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        // Resume what stayed paused, then wait for every root to end.
        for id in ids {
            if executor.snapshot(of: id)?.status == .paused { try await executor.resume(taskID: id) }
        }
        for id in ids {
            do {
                try await waitUntil("\(id) to finish", timeout: .seconds(60)) {
                    guard let snapshot = executor.snapshot(of: id) else { return false }
                    if snapshot.status == .paused { try? await executor.resume(taskID: id) }
                    return snapshot.isFinished
                }
            } catch {
                // What the stuck root looks like, for the next reader of the log.
                let snapshot = executor.snapshot(of: id)
                let stored = try? await executor.store.task(id: id)
                let running = executor.graph().tasks.filter { $0.status == .running }.map(\.id)
                Issue.record(
                    """
                    \(id) did not finish: \(String(describing: snapshot.map { ($0.status, $0.attempt, $0.children.map { ($0.id, $0.status) }) })); \
                    stored \(String(describing: stored.map { ($0.status, $0.ownerID, $0.attempt) })); running roots \(running)
                    """)
                throw error
            }
            try await executor.runEnded(id)
        }
        try await executor.flush()

        let stream = executor.progressStream
        let finishedIDs = ids
        let latest = try await within(.seconds(120), "every task finished on the stream") {
            var latest: TaskGraph?
            for await graph in stream {
                latest = graph
                if finishedIDs.allSatisfy({ graph.task($0)?.isFinished == true }) { break }
            }
            return latest
        }
        let graph = try #require(latest)
        let memory = executor.graph()
        for id in ids {
            let streamed = try #require(graph.task(id))
            let current = try #require(memory.task(id))
            #expect(streamed.status == current.status && streamed.attempt == current.attempt)
            let stored = try await executor.store.tree(of: id)
            for node in current.allNodes {
                let record = try #require(stored.first { $0.id == node.id })
                #expect(record.status == node.status, "\(node.id)")
                #expect(record.progress == node.progress, "\(node.id)")
                #expect(record.attempt == node.attempt, "\(node.id)")
            }
        }
        await executor.shutdown()
    }
}

enum CocoaLikeError: Error {
    case failed(Int)
}
