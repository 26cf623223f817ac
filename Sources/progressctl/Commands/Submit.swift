import ArgumentParser
import Foundation
import Progression

extension Progressctl {
    /// Queues a job for an executor that registered its kind.
    struct Submit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Submit a job: a pending root of a registered kind with a JSON input. Prints its id.",
            discussion: """
                The next executor that registered KIND runs it. With an idempotency key that a job of the same kind \
                already has, nothing is written and that job's id is printed.

                Examples:
                  progressctl submit import --input '{"file": "a.csv"}'
                  progressctl submit import --input '{"file": "a.csv"}' --idempotency-key a.csv --retryable --priority 5
                """)

        @OptionGroup var options: GlobalOptions

        @Argument(help: "The job kind, as the executor registered it.")
        var kind: String

        @Option(name: .long, help: ArgumentHelp("The job's input, as JSON.", valueName: "json"))
        var input: String

        @Option(name: .long, help: "The task id (default: a new UUID).")
        var id: String?

        @Option(name: .long, help: "Higher runs first.")
        var priority: Int = 0

        @Option(name: .customLong("idempotency-key"), help: ArgumentHelp("Submit at most once per kind with this key.", valueName: "key"))
        var idempotencyKey: String?

        @Flag(name: .long, help: "The job may be retried after it failed or was cancelled.")
        var retryable = false

        @Flag(name: .long, help: "The job may be paused.")
        var pausable = false

        /// `submit --json`.
        struct SubmitJSON: Codable {
            var id: String
            /// `false` when a job with the idempotency key existed.
            var created: Bool
        }

        func run() async throws {
            guard !kind.isEmpty else { throw CLIError.usage("the kind must not be empty") }
            let data = Data(input.utf8)
            do {
                _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
            } catch {
                throw CLIError.usage("--input is not valid JSON: \((error as NSError).userInfo[NSDebugDescriptionErrorKey] ?? error.localizedDescription)")
            }
            if let id, id.isEmpty { throw CLIError.usage("--id must not be empty") }
            let store = try options.openStore(readOnly: false)
            if let key = idempotencyKey, let existing = try await store.checked({ try await $0.root(kind: kind, idempotencyKey: key) }) {
                try report(existing.id, created: false)
                return
            }
            let now = Date()
            let taskID = id ?? UUID().uuidString.lowercased()
            let taskOptions = TaskOptions.default.pausable(pausable).retryable(retryable).priority(priority)
            let record = TaskRecord(
                id: taskID, name: kind, kind: kind, input: data, idempotencyKey: idempotencyKey, options: taskOptions,
                status: .pending, createdAt: now)
            let event = TaskEvent(taskID: taskID, rootID: taskID, kind: .created, at: now, attempt: 1, message: "submitted by progressctl")
            do {
                try await store.insert([record], events: [event])
            } catch let error as TaskStoreError where error.reason == .conflict {
                // Another submit with the same key may have won the race.
                if let key = idempotencyKey,
                    let existing = try await store.checked({ try await $0.root(kind: kind, idempotencyKey: key) })
                {
                    try report(existing.id, created: false)
                    return
                }
                throw CLIError("a task with id '\(taskID)' exists already")
            } catch let error as TaskStoreError {
                throw CLIError(store: error)
            }
            try report(taskID, created: true)
        }

        private func report(_ id: String, created: Bool) throws {
            if options.json {
                try JSONOutput.print(SubmitJSON(id: id, created: created))
            } else {
                if !created { Terminal.standardError("a job of kind '\(kind)' with idempotency key '\(idempotencyKey ?? "")' exists: \(id)") }
                Terminal.output(id)
            }
        }
    }
}
