import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// Sends a signal to a job.
    struct Signal: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send a signal (a name and a JSON payload) to a job; a job that waits for it goes on.",
            discussion: """
                The signal is kept in the database until the job's code takes it (TaskContext.signal): a job that \
                waits for it now is released at once and goes on with the next worker that has a free slot; one \
                that waits for it later takes it then. It only writes the database: no worker needs to run. The job \
                must exist and not have finished (a link, ROOT/NAME, stands for its child job); the name has 1 to \
                200 characters and no control characters; the payload is JSON of at most 1 MiB. Bad input is \
                refused with one line and status 64, and nothing is written. `show ID` lists a job's signals, taken \
                or waiting.

                Examples:
                  progressctl signal 8k3fq2xa approve
                  progressctl signal 8k3fq2xa approve --payload '{"by": "ops", "ticket": 4411}'
                  progressctl signal 8k3fq2xa/deploy resume --json
                """)

        @OptionGroup var options: GlobalOptions

        @Argument(help: "The job's id, or a unique prefix of it.")
        var id: String

        @Argument(help: "The signal's name, as the job's code waits for it.")
        var name: String

        @Option(name: .long, help: ArgumentHelp("The signal's payload, as JSON (at most 1 MiB).", valueName: "json"))
        var payload: String?

        /// `signal --json`: the signal as stored, the job it went to, and whether it released that job.
        struct SentJSON: Encodable {
            var signal: SignalJSON
            var job: JobReferenceJSON
            /// Whether the job waited for this signal and was released by it.
            var released: Bool
        }

        func run() async throws {
            do {
                try JobSignalRecord.checkName(name)
            } catch {
                throw CLIError.usage(error.description)
            }
            let data = try Self.payload(payload)
            let store = try options.openStore(readOnly: false)
            let job = try await store.resolveJob(id)
            let signal: JobSignalRecord
            do {
                signal = try await store.sendSignal(to: job.id, name: name, payload: data, at: Date())
            } catch let error as ProgressionError {
                throw CLIError.usage("\(error.description); nothing was sent")
            } catch let error as TaskStoreError {
                throw CLIError(store: error)
            }
            let after = try await store.checked { try await $0.task(id: job.id) } ?? job
            let released = job.wait == .signal(name) && after.wait == nil
            if options.json {
                try JSONOutput.print(
                    SentJSON(signal: SignalJSON(signal), job: JobReferenceJSON(id: after.id, job: after), released: released))
                return
            }
            let outcome =
                released
                ? "it waited for it, and goes on with the next worker"
                : "kept until the job takes it (it is \(after.displayStatus))"
            Terminal.output(
                "sent the signal '\(name)' to \(after.id) (\(after.name))\(data == nil ? "" : " with \(Format.bytes(Int64(data?.count ?? 0))) of JSON"): \(outcome)"
                    .escapedForTerminal)
        }

        /// The payload as given, checked: JSON of at most ``JobSignalRecord/maxPayloadBytes``; `nil` for none.
        static func payload(_ text: String?) throws -> Data? {
            guard let text else { return nil }
            let data = Data(text.utf8)
            do {
                _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
            } catch {
                throw CLIError.usage(
                    "--payload is not valid JSON: \((error as NSError).userInfo[NSDebugDescriptionErrorKey] ?? error.localizedDescription); nothing was sent")
            }
            guard data.count <= JobSignalRecord.maxPayloadBytes else {
                throw CLIError.usage(
                    "--payload is \(Format.bytes(Int64(data.count))) of JSON, more than the limit of 1 MiB; nothing was sent")
            }
            return data
        }
    }
}
