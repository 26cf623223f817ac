import ArgumentParser

/// The crash test: a worker that runs a batch of jobs against a SQLite file, and a driver that kills it with SIGKILL
/// at random moments, starts it again, and checks that no work was lost or redone after its commit.
struct CrashTest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "progression-bench crash-test",
        abstract: "Kill a Progression batch worker at random moments and check that it resumes without loss.",
        discussion: """
            Examples:
              progression-bench crash-test run --kills 20 --jobs 50
              progression-bench crash-test worker --db /tmp/x.sqlite --ledger /tmp/x.ledger --submit-batch 10 --exit-when-idle
            """,
        subcommands: [Run.self, Worker.self],
        defaultSubcommand: Run.self)
}
