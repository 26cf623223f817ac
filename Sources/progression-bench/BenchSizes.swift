/// How big each scenario is: the full run (the figures of issue 7) or the quick CI smoke run.
struct BenchSizes: Sendable {
    /// A/B repetitions for each ratio; medians are taken over them.
    var repetitions: Int
    /// Reports of the one-task scenario.
    var reportsOneTask: Int
    /// Live tasks of the many-task scenario, and reports each.
    var manyTasks: Int
    var reportsPerManyTask: Int
    /// Rows in the table the writer comparison updates, rows per batch, batches per timed trial, trials.
    var writerRows: Int
    var writerBatchSize: Int
    var writerBatchesPerTrial: Int
    var writerTrials: Int
    /// Tasks submitted by the throughput scenario, and how many are in flight at a time.
    var submittedTasks: Int
    var submitConcurrency: Int
    /// Running jobs of a dead owner in the recovery scenario, and how long it waits for all of them to be claimed.
    var recoveryJobs: Int
    var recoveryClaimWait: Duration
    /// Tasks of the list database, and events per task.
    var listTasks: Int
    var listEventsPerTask: Int
    /// Tasks run by the RSS child.
    var rssTasks: Int
    /// No-op jobs of the soak scenario (a retention of 10 s must reach its steady state).
    var soakJobs: Int
    /// Individually timed reports and pushes.
    var latencyReports: Int
    var latencyPushes: Int

    /// The figures of issue 7.
    static let full = BenchSizes(
        repetitions: 5, reportsOneTask: 1_000_000, manyTasks: 100, reportsPerManyTask: 10_000, writerRows: 20_000,
        writerBatchSize: 1_000, writerBatchesPerTrial: 200, writerTrials: 5, submittedTasks: 20_000,
        submitConcurrency: 8, recoveryJobs: 100_000, recoveryClaimWait: .seconds(30), listTasks: 1_000_000, listEventsPerTask: 10, rssTasks: 1_000_000,
        soakJobs: 1_000_000, latencyReports: 200_000, latencyPushes: 5_000)

    /// Small enough to finish within a minute on a slow shared machine.
    static let quick = BenchSizes(
        repetitions: 1, reportsOneTask: 100_000, manyTasks: 100, reportsPerManyTask: 1_000, writerRows: 4_000,
        writerBatchSize: 1_000, writerBatchesPerTrial: 20, writerTrials: 2, submittedTasks: 2_000,
        submitConcurrency: 8, recoveryJobs: 2_000, recoveryClaimWait: .seconds(5), listTasks: 20_000, listEventsPerTask: 10, rssTasks: 20_000, soakJobs: 20_000, latencyReports: 20_000,
        latencyPushes: 300)
}
