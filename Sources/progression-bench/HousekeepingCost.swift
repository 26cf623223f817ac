import Progression

/// What retention and the fleet's gauges cost the jobs that run beside them (issue 37: ≤ 5 %). The `jobs_per_s` loop
/// (SQLite, 8 in flight) and the producer with two workers (`fleet_jobs_per_s_producer_2workers`) run with both duties
/// off (`RetentionPolicy.keepEverything`, no gauges) and with both far busier than by default — a retention pass and a
/// gauge read every second (60 and 15 times as often as the defaults), deleting jobs finished a second ago while the
/// others run — alternately (ABBA over the repetitions); each ratio is the median of adjacent pairs (busy / off), so
/// that the machine's drift hits both sides. A ratio of 0.95 or more means the duties cost 5 % or less even then.
enum HousekeepingCost {
    static let scenario = Scenario(
        name: "housekeeping",
        keys: ["ratio_jobs_housekeeping", "ratio_fleet_housekeeping"]
    ) { context in
        let count = context.sizes.submittedTasks
        let concurrency = context.sizes.submitConcurrency
        var jobs: [Bool: [Double]] = [:]
        var fleet: [Bool: [Double]] = [:]
        for repetition in 0..<context.sizes.repetitions {
            for busy in [false, true].rotated(by: repetition) {
                let configure = busy ? Self.busy : Self.off
                let run = try await SubmitThroughput.jobs(
                    count: count, concurrency: concurrency, store: .sqlite, configure: configure)
                jobs[busy, default: []].append(run.perSecond)
                let (rate, _) = try await BenchDatabase.with({ try BenchDatabase.sqlite() }) {
                    try await FleetThroughput.producerAndTwoWorkers(count: count, on: $0, configure: configure)
                }
                fleet[busy, default: []].append(rate)
                context.log(
                    "  housekeeping \(busy ? "busy" : "off"): \(FigureFormat.number(run.perSecond)) jobs/s, "
                        + "fleet \(FigureFormat.number(rate)) jobs/s")
            }
        }
        func ratio(_ rates: [Bool: [Double]]) -> Double {
            Measurement.median(zip(rates[true]!, rates[false]!).map { $0 / $1 })
        }
        let pairs = "median of \(context.sizes.repetitions) adjacent pairs"
        return [
            Figure(
                "ratio_jobs_housekeeping", ratio(jobs), unit: "ratio", target: .atLeast(0.95),
                note: "jobs_per_s with retention and gauges every second (deleting jobs finished 1 s ago) / with "
                    + "neither, SQLite, \(FigureFormat.number(Double(count))) no-op jobs, \(pairs) (busy \(FigureFormat.number(Measurement.median(jobs[true]!))), "
                    + "off \(FigureFormat.number(Measurement.median(jobs[false]!))) jobs/s)"),
            Figure(
                "ratio_fleet_housekeeping", ratio(fleet), unit: "ratio", target: .atLeast(0.95),
                note: "fleet_jobs_per_s_producer_2workers the same way (both workers take turns at the duties), "
                    + "\(pairs) (busy \(FigureFormat.number(Measurement.median(fleet[true]!))), "
                    + "off \(FigureFormat.number(Measurement.median(fleet[false]!))) jobs/s)"),
        ]
    }

    /// Retention and gauges off.
    static let off: @Sendable (inout TaskExecutor.Configuration) -> Void = { configuration in
        configuration.retention = .keepEverything
        configuration.gaugeInterval = nil
    }

    /// Retention and gauges every second, deleting what finished a second ago.
    static let busy: @Sendable (inout TaskExecutor.Configuration) -> Void = { configuration in
        // Valid constants: the initializer refuses only periods and intervals that are not positive.
        configuration.retention = try! RetentionPolicy(
            completed: .seconds(1), failed: .seconds(1), cancelled: .seconds(1), interval: .seconds(1))
        configuration.gaugeInterval = .seconds(1)
    }
}
