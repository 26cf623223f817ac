import Progression

extension TaskExecutor {
    /// Waits (at most `timeout`) for a root's current run to end: ``TaskExecutor/waitForTask(_:)`` with a deadline.
    ///
    /// - Throws: ``TestFailure`` ("timed out waiting for the run of `id` to end") after `timeout`.
    public nonisolated func runEnded(_ id: String, timeout: Duration = .seconds(60)) async throws {
        try await within(timeout, "the run of \(id) to end") { await self.waitForTask(id) }
    }
}
