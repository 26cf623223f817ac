import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// Polls `condition` until it holds, failing after `timeout`. Not a sleep used as synchronisation: it waits for a state.
/// Every 2 ms: the executor's states in memory change within milliseconds.
func waitUntil(
    _ what: String, timeout: Duration = .seconds(120), _ condition: () async throws -> Bool
) async throws {
    try await poll(what, timeout: timeout, every: .milliseconds(2), condition)
}

extension TaskExecutor {
    /// Waits until a task (root or subtask) has the status.
    nonisolated func waitForStatus(_ id: String, _ status: TaskStatus, timeout: Duration = .seconds(120)) async throws {
        try await waitUntil("\(id) to be \(status)", timeout: timeout) { self.snapshot(of: id)?.status == status }
    }

    /// Waits until a root's code has ended and returns its snapshot.
    nonisolated func finished(_ id: String) async throws -> TaskSnapshot {
        try await waitUntil("\(id) to finish") { self.snapshot(of: id)?.isFinished ?? false }
        return try #require(await snapshot(of: id))
    }
}

/// An executor for one test whose time is `clock`'s: finished tasks stay visible, and each report is written at once.
func makeExecutor(_ kind: StoreKind, in directory: TemporaryDirectory, clock: ManualClock) async throws -> TaskExecutor {
    var configuration = TaskExecutor.Configuration()
    configuration.clock = clock
    configuration.completedTaskVisibility = .seconds(600)
    configuration.writeWindow = .milliseconds(1)
    return try TaskExecutor(store: try await kind.make(in: directory), configuration: configuration)
}

/// An executor for one test: finished tasks stay visible.
func makeExecutor(_ kind: StoreKind, in directory: TemporaryDirectory) async throws -> TaskExecutor {
    var configuration = TaskExecutor.Configuration()
    configuration.completedTaskVisibility = .seconds(600)
    configuration.publishInterval = .milliseconds(5)
    configuration.writeWindow = .milliseconds(5)
    return try TaskExecutor(store: try await kind.make(in: directory), configuration: configuration)
}
