import Foundation
import Progression
import ServiceLifecycle
import Synchronization

/// `run`'s foreground part, as a service next to the executor: draws the job's progress (a tree redrawn in place at
/// most 10 times a second on a terminal, a plain line at most once a second otherwise) until the job finishes or a
/// graceful shutdown (Ctrl-C, SIGTERM) begins. Returning ends the group.
///
/// The job is read from the store: while it waits for its folders it holds no slot and is in no process's memory,
/// and its folders may run in other processes (a `serve` on the same database). Files being read are drawn for the
/// folders that run in this process.
struct JobDriver: Service {
    let executor: TaskExecutor
    let jobID: String
    /// The job's final status, once it finished.
    let outcome = Outcome()

    final class Outcome: Sendable {
        private let value = Mutex<TaskStatus?>(nil)
        var status: TaskStatus? { value.withLock { $0 } }
        func set(_ status: TaskStatus) { value.withLock { $0 = status } }
    }

    func run() async throws {
        let output = TerminalOutput()
        let started = ContinuousClock.now
        var lastPlain: ContinuousClock.Instant?
        var lastPlainText = ""
        var announcedElsewhere = false
        var announcedPaused = false
        var lastJob: JobDisplay?
        var lastCounts: JobStats.Counts?

        var announcedStorage = false
        func draw(_ job: JobDisplay, counts: JobStats.Counts?, storage: StorageHealth, final: Bool) {
            let renderer = ProgressTreeRenderer(columns: output.columns)
            if output.isTerminal {
                output.redraw(
                    renderer.lines(
                        job: job, counts: counts, elapsed: (ContinuousClock.now - started) / .seconds(1),
                        storage: storage))
            } else {
                if case .failing(let since, let error) = storage, !announcedStorage {
                    announcedStorage = true
                    output.line("storage failing since \(Format.clock(since)): \(error) — waiting; writes are retried")
                } else if storage.isHealthy, announcedStorage {
                    announcedStorage = false
                    output.line("storage writes succeed again")
                }
                let text = renderer.plainLine(job: job, counts: counts)
                let now = ContinuousClock.now
                if text != lastPlainText, final || lastPlain.map({ now - $0 >= .seconds(1) }) ?? true {
                    output.line(text)
                    lastPlainText = text
                    lastPlain = now
                }
            }
        }

        var lastStorage = StorageHealth.healthy
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            let graph = executor.graph()
            lastStorage = graph.storage
            // A store that fails keeps the last picture; the loop looks again.
            if let tree = try? await executor.store.tree(of: jobID), let record = tree.first {
                let job = JobDisplay(record: record, tree: tree, graph: graph)
                let counts = JobStats.total(of: job, links: tree)
                lastJob = job
                lastCounts = counts
                if record.status.isFinished {
                    draw(job, counts: counts, storage: graph.storage, final: true)
                    outcome.set(record.status)
                    break
                }
                draw(job, counts: counts, storage: graph.storage, final: false)
                if record.status == .paused, !announcedPaused {
                    announcedPaused = true
                    output.endBlock()
                    output.line("The job is paused: `progressctl resume \(jobID)` continues it.")
                }
                if let owner = record.ownerID, owner != executor.ownerID, !announcedElsewhere {
                    announcedElsewhere = true
                    output.endBlock()
                    output.line(
                        "Job \(jobID) is run by another live process (owner \(owner)) on this database; waiting for "
                            + "it to finish.")
                }
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
        if outcome.status == nil, let lastJob, output.isTerminal {
            draw(lastJob, counts: lastCounts, storage: lastStorage, final: true)
        }
        output.endBlock()
    }
}
