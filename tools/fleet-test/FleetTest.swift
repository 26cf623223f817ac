import ArgumentParser

/// The fleet's processes for tests and the benchmark: workers that run test job kinds (and fire schedules), and a
/// producer that only enqueues through ``JobClient`` and reads the results back.
struct FleetTest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "progression-bench fleet-test",
        abstract: "Worker and producer processes of a Progression fleet, for tests and the benchmark.",
        discussion: """
            Examples:
              progression-bench fleet-test worker --db /tmp/x.sqlite --ledger /tmp/x.ledger --concurrency 4
              progression-bench fleet-test produce --db /tmp/x.sqlite --count 2000 --batch 100 --wait
            """,
        subcommands: [Worker.self, Produce.self])
}
