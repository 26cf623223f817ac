import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// The job kinds of the database: who runs them, their limits, whether they are paused, what waits.
    struct Kinds: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the job kinds workers registered: running workers, limit across the fleet, paused or not, pending and running jobs.",
            discussion: """
                A kind paused with pause-kind starts no new job on any worker (running ones go on) until resume-kind.

                Examples:
                  progressctl kinds
                  progressctl kinds --json
                """)

        @OptionGroup var options: GlobalOptions

        /// `kinds --json`: one object per kind.
        struct KindJSON: Encodable {
            var name: String
            /// Live workers that registered it.
            var workers: Int
            @Null var maxConcurrent: Int?
            var paused: Bool
            @Null var pausedAt: Date?
            var pending: Int
            var running: Int
        }

        func run() async throws {
            let store = try options.openStore(readOnly: true)
            let registered = try await store.checked { try await $0.registeredKinds() }
            let paused = try await store.checked { try await $0.pausedKinds() }
            let owners = try await store.checked { try await $0.owners() }.filter { $0.liveness().isAlive }
            let statistics = try await store.checked { try await $0.statistics() }
            var names = Set(registered.keys).union(paused.keys).union(owners.flatMap { $0.kinds ?? [] })
            names.formUnion(statistics.pendingByKind.keys.filter { !$0.isEmpty })
            var kinds: [KindJSON] = []
            for name in names.sorted() {
                let running = try await store.checked {
                    try await $0.countRoots(TaskQuery(statuses: [.running], kind: name), upTo: nil)
                }
                kinds.append(
                    KindJSON(
                        name: name, workers: owners.filter { $0.kinds?.contains(name) == true }.count,
                        maxConcurrent: registered[name]?.maxConcurrent, paused: paused[name] != nil,
                        pausedAt: paused[name], pending: statistics.pendingByKind[name] ?? 0, running: running))
            }
            if options.json {
                try JSONOutput.print(kinds)
                return
            }
            guard !kinds.isEmpty else {
                Terminal.output("no job kinds: no worker registered one yet")
                return
            }
            let rows = kinds.map { kind in
                [
                    kind.name.escapedForTerminal, "\(kind.workers)", kind.maxConcurrent.map { "\($0)" } ?? "-",
                    kind.paused ? Terminal.paint("paused", .yellow) : "no", Format.count(kind.pending),
                    Format.count(kind.running),
                ]
            }
            for line in Format.table(header: ["KIND", "WORKERS", "LIMIT", "PAUSED", "PENDING", "RUNNING"], rows: rows) {
                Terminal.output(line)
            }
        }
    }

    /// Pauses a job kind across every worker.
    struct PauseKind: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pause-kind",
            abstract: "Pause a job kind on every worker: no new job of it starts (running ones go on) until resume-kind.",
            discussion: """
                Examples:
                  progressctl pause-kind import
                """)

        @OptionGroup var options: GlobalOptions
        @Argument(help: "The job kind.") var kind: String

        func run() async throws {
            guard !kind.isEmpty else { throw CLIError.usage("the kind must not be empty") }
            let store = try options.openStore(readOnly: false)
            let changed = try await store.checked { [kind] in try await $0.setKindPaused(kind, paused: true, at: Date()) }
            Terminal.output(changed ? "paused kind '\(kind.escapedForTerminal)'" : "kind '\(kind.escapedForTerminal)' was paused already")
        }
    }

    /// Lets a paused job kind start jobs again.
    struct ResumeKind: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "resume-kind",
            abstract: "Let a paused job kind start jobs again, on every worker.",
            discussion: """
                Examples:
                  progressctl resume-kind import
                """)

        @OptionGroup var options: GlobalOptions
        @Argument(help: "The job kind.") var kind: String

        func run() async throws {
            guard !kind.isEmpty else { throw CLIError.usage("the kind must not be empty") }
            let store = try options.openStore(readOnly: false)
            let changed = try await store.checked { [kind] in try await $0.setKindPaused(kind, paused: false, at: Date()) }
            Terminal.output(changed ? "resumed kind '\(kind.escapedForTerminal)'" : "kind '\(kind.escapedForTerminal)' was not paused")
        }
    }
}
