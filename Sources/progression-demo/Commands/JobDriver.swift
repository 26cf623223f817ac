import Foundation
import Progression
import ServiceLifecycle
import Synchronization

/// `run`'s foreground part, as a service next to the executor: draws the job's progress (a tree redrawn in place at
/// most 10 times a second on a terminal, a plain line at most once a second otherwise) until the job finishes or a
/// graceful shutdown (Ctrl-C, SIGTERM) begins. Returning ends the group.
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
        var lastStoreCheck: ContinuousClock.Instant?
        var announcedElsewhere = false
        var announcedPaused = false
        var lastRoot: TaskSnapshot?

        var announcedStorage = false
        func draw(_ root: TaskSnapshot, storage: StorageHealth, final: Bool) {
            let renderer = ProgressTreeRenderer(columns: output.columns)
            let counts = JobStats.of(jobID: jobID)?.snapshot
            if output.isTerminal {
                output.redraw(
                    renderer.lines(
                        root: root, counts: counts, elapsed: (ContinuousClock.now - started) / .seconds(1),
                        storage: storage))
            } else {
                if case .failing(let since, let error) = storage, !announcedStorage {
                    announcedStorage = true
                    output.line("storage failing since \(Format.clock(since)): \(error) — waiting; writes are retried")
                } else if storage.isHealthy, announcedStorage {
                    announcedStorage = false
                    output.line("storage writes succeed again")
                }
                let text = renderer.plainLine(root: root, counts: counts)
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
            if let root = graph.task(jobID) {
                lastRoot = root
                if root.isFinished {
                    draw(root, storage: graph.storage, final: true)
                    outcome.set(root.status)
                    break
                }
                draw(root, storage: graph.storage, final: false)
                if root.status == .paused, !announcedPaused {
                    announcedPaused = true
                    output.endBlock()
                    output.line("The job is paused: `progressctl resume \(jobID)` continues it.")
                }
            } else if lastStoreCheck.map({ ContinuousClock.now - $0 >= .seconds(1) }) ?? true {
                // Not in this executor: another live process holds it (a `serve` on the same database).
                lastStoreCheck = .now
                if let record = try? await executor.store.task(id: jobID) {
                    if record.status.isFinished {
                        outcome.set(record.status)
                        break
                    }
                    if !announcedElsewhere {
                        announcedElsewhere = true
                        output.line(
                            "Job \(jobID) is run by another live process (owner \(record.ownerID ?? "?")) on this "
                                + "database; waiting for it to finish.")
                    } else if !output.isTerminal {
                        let percent = Format.percent(record.progress).trimmingCharacters(in: .whitespaces)
                        if percent != lastPlainText {
                            output.line("progress \(percent) (in the other process)")
                            lastPlainText = percent
                        }
                    }
                }
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
        if outcome.status == nil, let lastRoot, output.isTerminal {
            draw(lastRoot, storage: lastStorage, final: true)
        }
        output.endBlock()
    }
}
