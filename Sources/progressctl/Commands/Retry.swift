import ArgumentParser
import Foundation
import Progression

extension Progressctl {
    /// Runs failed or cancelled tasks again.
    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run a failed or cancelled task again (its options must allow retries).",
            discussion: """
                With no running executor the task is marked pending with the next attempt number, and the next \
                executor that registered its kind runs it. A closure task can be retried only through the executor \
                that holds it.

                Examples:
                  progressctl retry 3f2a
                  progressctl retry --all-failed --kind import --dry-run
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var change: ChangeOptions

        @Argument(help: "The task id, or a unique prefix of it.")
        var id: String?

        @Flag(name: .customLong("all-failed"), help: "Retry every failed task (of --kind, if given).")
        var allFailed = false

        @Option(name: .long, help: "With --all-failed: only this job kind.")
        var kind: String?

        @Flag(name: .customLong("dry-run"), help: "Show what would change; write nothing.")
        var dryRun = false

        func validate() throws {
            if allFailed == (id != nil) { throw ValidationError("give a task id or --all-failed (not both)") }
            if kind != nil, !allFailed { throw ValidationError("--kind goes with --all-failed") }
        }

        func run() async throws {
            try change.validateWait()
            let store = try options.openStore(readOnly: false)
            let control = TaskControl(store: store, wait: change.waitDuration)
            if let id {
                let task = try await store.resolveTask(id)
                try ChangeReport.print([try await control.perform(.retry, on: task, dryRun: dryRun)], json: options.json)
                return
            }
            var failed: [TaskRecord] = []
            while true {
                let page = try await store.checked {
                    try await $0.roots(TaskQuery(statuses: [.failed], kind: kind, limit: 500, offset: failed.count))
                }
                failed += page
                if page.count < 500 { break }
            }
            var results: [TaskControl.Result] = []
            var errors: [String] = []
            for task in failed {
                do {
                    results.append(try await control.perform(.retry, on: task, dryRun: dryRun))
                } catch let error as CLIError {
                    errors.append(error.message)
                }
            }
            try ChangeReport.print(results, json: options.json)
            for message in errors { Terminal.standardError("progressctl: skipped: \(message)") }
            if !options.json, failed.isEmpty { Terminal.standardError("no failed tasks\(kind.map { " of kind \($0)" } ?? "")") }
            if !errors.isEmpty {
                throw CLIError("\(errors.count) of \(failed.count) failed tasks were not retried")
            }
        }
    }
}
