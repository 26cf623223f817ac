/// Recovery after a crash: 100,000 unfinished jobs of a dead owner; the time from a new executor's start until all
/// are claimed and the first is running. Target < 1,000 ms.
///
/// TODO(scheduler): this needs the scheduler (owner claims, job rehydration) that is being written now. The plan:
/// 1. Build a database of 100,000 `pending`/`running` job roots whose `owner_id` is an owner row with a stale
///    heartbeat and a pid that is not alive (raw batched inserts through ProgressionSQLite, as ``ListDatabase`` does,
///    into a file created by `SQLiteTaskStore`).
/// 2. Start a `TaskExecutor` on it with the job kind registered; the job body marks a ``Flag`` when it runs.
/// 3. Clock from before the executor starts until every row's `owner_id` is the new owner (poll `store.statistics()`
///    or count rows) and the flag is set; report the median of 3 runs as `recovery_ms_100k`.
///
/// Until then the figure is reported as pending (`null`), never estimated.
enum RecoveryLatency {
    static let scenario = Scenario(name: "recovery", keys: ["recovery_ms_100k"]) { _ in
        [
            .pending(
                "recovery_ms_100k", unit: "ms", target: .below(1_000),
                reason: "needs the scheduler (TODO(scheduler) in RecoveryLatency.swift)")
        ]
    }
}
