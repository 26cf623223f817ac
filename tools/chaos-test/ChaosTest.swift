import ArgumentParser

/// The chaos test: worker processes on one PostgreSQL server that is restarted and whose backends are killed at
/// random, and a network partition of one worker; a driver checks that every job completes once, no worker freezes
/// and every worker stops gracefully.
struct ChaosTest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "progression-bench chaos-test",
        abstract: "Restart PostgreSQL, kill its backends and cut a worker off while workers run jobs; check the outcome.",
        discussion: """
            Examples:
              progression-bench chaos-test run --workers 3 --jobs 500 --restarts 10
              progression-bench chaos-test partition
            Needs a build with the PostgreSQL trait (swift build --traits PostgreSQL).
            """,
        subcommands: [Run.self, Partition.self, Worker.self],
        defaultSubcommand: Run.self)
}
