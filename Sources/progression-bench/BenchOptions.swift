import Foundation

/// The command line of `progression-bench`.
///
/// ```
/// progression-bench [--quick] [--json] [--only KEY[,KEY…]] [--data-dir DIR] [--repetitions N]
/// progression-bench --child rss --tasks N        (internal: the RSS scenario's child process)
/// ```
struct BenchOptions: Sendable {
    /// Reduced sizes that finish within a minute (the CI smoke run).
    var quick = false
    /// Print one JSON object on stdout instead of the table (progress still goes to stderr).
    var json = false
    /// Scenario names or figure keys to run; empty: all.
    var only: Set<String> = []
    /// Where the large list database is built once and kept.
    var dataDirectory = ".build/bench-data"
    /// Overrides the number of A/B repetitions.
    var repetitions: Int?
    /// Run even though this is a debug build (numbers are meaningless then).
    var allowDebug = false
    /// The PostgreSQL scenario's server: a URL of a server started by the caller (with the settings to measure), or
    /// `nil` for a throwaway one the bench starts with PostgreSQL's defaults.
    var postgresURL: String?
    /// Internal: run as a child process for one scenario (`rss`).
    var child: String?
    /// Internal, for a child: how many tasks to run, and how many in flight.
    var childTasks = 0
    var childConcurrency = 8

    static let usage = """
        usage: progression-bench [--quick] [--json] [--only KEY[,KEY...]] [--data-dir DIR] [--repetitions N]
                                 [--postgres-url URL]

          --quick          reduced sizes (CI smoke run, < 1 minute): checks that every scenario runs and gives sane
                           numbers; exits non-zero only when a scenario fails or a figure is not finite and positive
          --json           print one JSON object (figures as numbers) on stdout; the table goes to stderr
          --only KEYS      run only the scenarios named, or those producing the given figure keys (comma-separated)
          --data-dir DIR   where the 1M-task list database is built once and reused (default .build/bench-data)
          --repetitions N  A/B repetitions for the report ratios (default 5, quick 1)
          --allow-debug    run in a debug build anyway (the numbers mean nothing)
          --postgres-url URL  measure PostgreSQL on this server (a schema of its own per run, dropped after); default:
                           a throwaway server the bench starts with PostgreSQL's stock settings (it prints them)

        Build it in release mode: swift run -c release progression-bench

        usage: progression-bench crash-test|fault-test|fleet-test|chaos-test|console-bench [ARGUMENTS...]

          runs one of the project's test tools (in any build); `progression-bench crash-test --help` says more
        """

    /// Parses the arguments after the program name.
    ///
    /// - Throws: ``BenchOptionError`` for an unknown option or a missing value.
    init(arguments: [String]) throws {
        var remaining = arguments[...]
        func value(for option: String) throws -> String {
            guard let next = remaining.popFirst() else { throw BenchOptionError("\(option) needs a value") }
            return next
        }
        while let argument = remaining.popFirst() {
            switch argument {
            case "--quick": quick = true
            case "--json": json = true
            case "--only":
                only.formUnion(
                    try value(for: argument).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
            case "--data-dir": dataDirectory = try value(for: argument)
            case "--repetitions":
                guard let count = Int(try value(for: argument)), count > 0 else {
                    throw BenchOptionError("--repetitions needs a positive number")
                }
                repetitions = count
            case "--allow-debug": allowDebug = true
            case "--postgres-url": postgresURL = try value(for: argument)
            case "--child": child = try value(for: argument)
            case "--tasks":
                guard let count = Int(try value(for: argument)), count > 0 else {
                    throw BenchOptionError("--tasks needs a positive number")
                }
                childTasks = count
            case "--concurrency":
                guard let count = Int(try value(for: argument)), count > 0 else {
                    throw BenchOptionError("--concurrency needs a positive number")
                }
                childConcurrency = count
            case "--help", "-h": throw BenchOptionError(nil)
            default: throw BenchOptionError("unknown option '\(argument)'")
            }
        }
    }

    /// The sizes this run uses.
    var sizes: BenchSizes {
        var sizes = quick ? BenchSizes.quick : BenchSizes.full
        if let repetitions { sizes.repetitions = repetitions }
        return sizes
    }
}

/// A command line that cannot be run; `nil` message: help was asked for.
struct BenchOptionError: Error {
    let message: String?

    init(_ message: String?) { self.message = message }
}
