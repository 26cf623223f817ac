/// One benchmark scenario: a name (for `--only`), the figure keys it produces, and the code that measures them.
struct Scenario: Sendable {
    let name: String
    /// A name that selects this scenario with others (`--only postgres`).
    var group: String?
    /// Keys this scenario produces; `--only` selects a scenario by its name or any of these.
    let keys: [String]
    let run: @Sendable (BenchContext) async throws -> [Figure]

    init(
        name: String, group: String? = nil, keys: [String],
        run: @escaping @Sendable (BenchContext) async throws -> [Figure]
    ) {
        self.name = name
        self.group = group
        self.keys = keys
        self.run = run
    }

    /// Whether `--only` (empty: everything) selects this scenario.
    func isSelected(by only: Set<String>) -> Bool {
        only.isEmpty || only.contains(name) || group.map(only.contains) == true || keys.contains(where: only.contains)
    }

    /// Every scenario, in the order they run: the report ratios first, while the machine is freshest.
    static let all: [Scenario] = everyScenario

    private static var everyScenario: [Scenario] {
        var scenarios = sqliteScenarios
        #if PostgreSQL
        // Only with the PostgreSQL trait: a server started by the bench on this machine.
        scenarios += PostgresThroughput.scenarios
        #endif
        return scenarios
    }

    private static let sqliteScenarios: [Scenario] = [
        ReportThroughput.oneTask,
        ReportThroughput.manyTasks,
        StreamConsumerLag.scenario,
        WriteBehindLag.scenario,
        WriterThroughput.scenario,
        ReportLatency.scenario,
        SubmitThroughput.scenario,
        FleetThroughput.scenario,
        FanoutBench.scenario,
        TimeBench.scenario,
        RecoveryLatency.scenario,
        ListLatency.scenario,
        ResidentMemory.scenario,
        SoakBench.scenario,
        HousekeepingCost.scenario,
        JobLatency.scenario,
    ]
}
