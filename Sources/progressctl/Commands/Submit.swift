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

        @Option(name: .long, help: "The task id (default: a new short id, as the library gives).")
        var id: String?

        @Option(name: .long, parsing: .unconditional, help: "Higher runs first (default: the kind's).")
        var priority: Int?

        @Option(name: .customLong("idempotency-key"), help: ArgumentHelp("Submit at most once per kind with this key.", valueName: "key"))
        var idempotencyKey: String?

        @Flag(inversion: .prefixedNo, help: "Whether the job may be retried after it failed or was cancelled (default: the kind's).")
        var retryable: Bool?

        @Flag(inversion: .prefixedNo, help: "Whether the job may be paused (default: the kind's).")
        var pausable: Bool?

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
            let taskID: String
            if let id {
                taskID = id
            } else {
                taskID = TaskIdentifier.root(try await store.checked { try await $0.reserveIdentifiers(1) }.lowerBound)
            }
            let taskOptions = try await options(for: store)
            let record = TaskRecord(
                id: taskID, name: kind, kind: kind, input: data, idempotencyKey: idempotencyKey, options: taskOptions,
                status: .pending, priority: taskOptions.priority, createdAt: now)
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

        /// The kind's registered options with what the command line gives over them. When no executor of this
        /// database registered the kind yet, the given fields are marked so that the executor that runs the job fills
        /// in the others from its kind.
        private func options(for store: OperatorStore) async throws -> TaskOptions {
            var given: Set<TaskOptions.Field> = []
            let registered = try await store.checked { try await $0.registeredKinds() }[kind]
            var options = registered ?? .default
            if let retryable {
                options.canRetry = retryable
                given.insert(.canRetry)
            }
            if let pausable {
                options.canPause = pausable
                given.insert(.canPause)
            }
            if let priority {
                options.priority = priority
                given.insert(.priority)
            }
            if registered == nil { options.givenFields = given }
            return options
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
