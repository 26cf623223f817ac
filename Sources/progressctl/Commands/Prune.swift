import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// Deletes old finished tasks, and gives the space back.
    struct Prune: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete finished tasks (with their trees and history) that finished longer ago than a duration.",
            discussion: """
                After deleting, it copies the write-ahead log into the database and truncates it (a TRUNCATE \
                checkpoint), so the -wal file does not keep the deleted rows' size. The database file keeps its \
                size (SQLite reuses the free pages) unless --vacuum rewrites it; a vacuum needs a moment when no \
                other process writes, and waits for it up to --busy-timeout. --dry-run counts what it would delete \
                and writes nothing.

                Examples:
                  progressctl prune --older-than 7d --dry-run
                  progressctl prune --older-than 7d
                  progressctl prune --older-than 12h --status completed --vacuum
                """)

        @OptionGroup var options: GlobalOptions

        @Option(name: .customLong("older-than"), help: ArgumentHelp("Finished longer ago than this (30m, 12h, 7d).", valueName: "duration"))
        var olderThan: String

        @Option(name: .long, help: ArgumentHelp("Only these finished statuses (repeat, or a comma list; default: completed, failed, cancelled).", valueName: "status"))
        var status: [String] = []

        @Flag(name: .customLong("dry-run"), help: "Count what would be deleted; write nothing.")
        var dryRun = false

        @Flag(name: .long, help: "Then rewrite the database (VACUUM) to return the free space to the file system.")
        var vacuum = false

        /// `prune --json`.
        struct PruneJSON: Encodable {
            /// Roots deleted (or that would be).
            var deleted: Int
            /// Tasks deleted with them, the roots included.
            var tasks: Int
            var finishedBefore: Date
            var statuses: [String]
            var dryRun: Bool
            var vacuumed: Bool
            /// The database file and its write-ahead log, before and after.
            var bytesBefore: Int64
            var bytesAfter: Int64
        }

        func run() async throws {
            let seconds = try InputParsing.seconds(olderThan, option: "--older-than")
            let statuses = try InputParsing.statuses(status) ?? Set(TaskStatus.allCases.filter(\.isFinished))
            if let unfinished = statuses.first(where: { !$0.isFinished }) {
                throw CLIError.usage("prune removes finished tasks only, not \(unfinished) ones")
            }
            let store = try options.openStore(readOnly: dryRun)
            let before = Date().addingTimeInterval(-seconds)
            let bytesBefore = await store.databaseBytes()
            let result = try await store.checked {
                try await $0.prune(finishedBefore: before, statuses: statuses, dryRun: dryRun)
            }
            // The prune is committed. The checkpoint that follows only shrinks the write-ahead log: when another
            // process holds it (a reader, a writer), the prune still succeeded, and the log shrinks at a later
            // checkpoint. A vacuum was asked for: its failure is the command's.
            var checkpointSkipped: String?
            if !dryRun {
                do {
                    try await store.maintain(vacuum ? .vacuum : .truncatingCheckpoint(patience: .seconds(5)))
                } catch let error as TaskStoreError {
                    if vacuum {
                        throw CLIError("pruned \(Format.tasks(result.roots)), but the vacuum failed: \(CLIError(store: error).message)")
                    }
                    checkpointSkipped = CLIError(store: error).message
                }
            }
            if let checkpointSkipped {
                Terminal.standardError(
                    "progressctl: note: the write-ahead log was not truncated (\(checkpointSkipped)); it shrinks at a later checkpoint")
            }
            let bytesAfter = await store.databaseBytes()
            if options.json {
                try JSONOutput.print(
                    PruneJSON(
                        deleted: result.roots, tasks: result.tasks, finishedBefore: before,
                        statuses: statuses.map(\.rawValue).sorted(), dryRun: dryRun, vacuumed: vacuum && !dryRun,
                        bytesBefore: bytesBefore, bytesAfter: bytesAfter))
                return
            }
            let subtasks = result.tasks - result.roots
            var line = "\(dryRun ? "would prune" : "pruned") \(Format.tasks(result.roots))"
            if subtasks > 0 { line += " (and \(Format.count(subtasks)) subtask\(subtasks == 1 ? "" : "s"))" }
            line += " finished before \(Format.time(before))"
            if dryRun {
                if vacuum { line += ", then vacuum" }
            } else {
                line += "; database \(Format.bytes(bytesBefore)) → \(Format.bytes(bytesAfter))"
            }
            Terminal.output(line)
        }
    }
}
