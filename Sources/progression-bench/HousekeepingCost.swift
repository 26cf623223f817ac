import Progression

/// What retention and the fleet's gauges cost the jobs that run beside them (issue 37: ≤ 5 %). The `jobs_per_s` loop
/// (SQLite, 8 in flight) and the producer with two workers (`fleet_jobs_per_s_producer_2workers`) run with both duties
/// off (`RetentionPolicy.keepEverything`, no gauges) and with both far busier than by default — a retention pass and a
/// gauge read every second (60 and 15 times as often as the defaults), deleting jobs finished a second ago while the
/// others run — alternately (ABBA over the repetitions), 100,000 jobs a run; each ratio is the median of adjacent pairs (busy / off), so
/// that the machine's drift hits both sides. A ratio of 0.95 or more means the duties cost 5 % or less even then.
enum HousekeepingCost {
    static let scenario = Scenario(
        name: "housekeeping",
        keys: ["ratio_jobs_housekeeping", "ratio_jobs_gauges", "ratio_fleet_housekeeping"]
    ) { context in
        // Long enough (5 s or more a run) for several turns of each duty; the smoke run only checks that it runs.
        let count = context.options.quick ? context.sizes.submittedTasks : 100_000
        let concurrency = context.sizes.submitConcurrency
        var jobs: [Variant: [Double]] = [:]
        var fleet: [Variant: [Double]] = [:]
        for repetition in 0..<context.sizes.repetitions {
            for variant in Variant.allCases.rotated(by: repetition) {
                let run = try await SubmitThroughput.jobs(
                    count: count, concurrency: concurrency, store: .sqlite, configure: variant.configure)
                jobs[variant, default: []].append(run.perSecond)
                var line = "  housekeeping \(variant): \(FigureFormat.number(run.perSecond)) jobs/s"
                if variant != .gauges {
                    let (rate, _) = try await BenchDatabase.with({ try BenchDatabase.sqlite() }) {
                        try await FleetThroughput.producerAndTwoWorkers(count: count, on: $0, configure: variant.configure)
                    }
                    fleet[variant, default: []].append(rate)
                    line += ", fleet \(FigureFormat.number(rate)) jobs/s"
                }
                context.log(line)
            }
        }
        func ratio(_ rates: [Variant: [Double]], _ variant: Variant) -> Double {
            Measurement.median(zip(rates[variant]!, rates[.off]!).map { $0 / $1 })
        }
        let pairs = "median of \(context.sizes.repetitions) adjacent pairs"
        return [
            Figure(
                "ratio_jobs_housekeeping", ratio(jobs, .busy), unit: "ratio", target: .atLeast(0.95),
                note: "jobs_per_s with retention and gauges every second (deleting jobs finished 1 s ago) / with "
                    + "neither, SQLite, \(FigureFormat.number(Double(count))) no-op jobs, \(pairs) (busy \(FigureFormat.number(Measurement.median(jobs[.busy]!))), "
                    + "off \(FigureFormat.number(Measurement.median(jobs[.off]!))) jobs/s)"),
            Figure(
                "ratio_jobs_gauges", ratio(jobs, .gauges), unit: "ratio", target: .atLeast(0.95),
                note: "the same with the gauges alone every second, no retention (\(FigureFormat.number(Measurement.median(jobs[.gauges]!))) jobs/s)"),
            Figure(
                "ratio_fleet_housekeeping", ratio(fleet, .busy), unit: "ratio", target: .atLeast(0.95),
                note: "fleet_jobs_per_s_producer_2workers the same way (both workers take turns at the duties), "
                    + "\(pairs) (busy \(FigureFormat.number(Measurement.median(fleet[.busy]!))), "
                    + "off \(FigureFormat.number(Measurement.median(fleet[.off]!))) jobs/s)"),
        ]
    }

    /// The runs compared: both duties off, both busy, the gauges alone busy.
    enum Variant: String, CaseIterable, CustomStringConvertible {
        case off, busy, gauges

        var description: String { rawValue }

        var configure: @Sendable (inout TaskExecutor.Configuration) -> Void {
            switch self {
            case .off: HousekeepingCost.off
            case .busy: HousekeepingCost.busy
            case .gauges: { configuration in
                HousekeepingCost.off(&configuration)
                configuration.gaugeInterval = .seconds(1)
            }
            }
        }
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
