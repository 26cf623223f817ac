import ArgumentParser
import Foundation
import ProgressionOperator

/// Options of the commands that change tasks: `pause`, `resume`, `cancel`, `retry`, `remove`.
struct ChangeOptions: ParsableArguments {
    /// How long to wait for a live executor to apply the change.
    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Seconds to wait for a running executor to apply the change.", valueName: "seconds"))
    var wait: Double = 5

    /// Show what would change; write nothing.
    @Flag(name: .customLong("dry-run"), help: "Show what would change; write nothing (the database file is left as it is).")
    var dryRun = false

    /// Change tasks chosen by filters without asking first.
    @Flag(name: [.customShort("y"), .long], help: "With filters: go ahead without asking (needed when stdin or stdout is not a terminal).")
    var yes = false

    var waitDuration: Duration { .milliseconds(Int64(max(0, min(wait, Self.longestWait)) * 1000)) }

    /// A day: longer waits are refused (a live owner answers within a second).
    static let longestWait = 86_400.0

    /// Refuses a wait that is negative, not a number, or longer than a day.
    func validateWait() throws {
        guard wait >= 0, wait.isFinite, wait <= Self.longestWait else {
            throw CLIError.usage("--wait must be between 0 and \(Int(Self.longestWait)) seconds")
        }
    }
}
