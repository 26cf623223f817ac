import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One run of `progressctl watch`: polls the store, and draws the dashboard on a terminal or prints change lines
/// otherwise, until the watched tasks finish (with an id, or `--until-done`), the database goes away, or a signal
/// stops it.
struct WatchSession {
    /// What to watch and how to show it.
    struct Configuration {
        /// The task to watch, resolved to its full id; `nil` to follow every unfinished root.
        var taskID: String?
        /// End when every watched task has finished (always so with an id).
        var untilDone: Bool
        /// Change lines for every node, not only the roots.
        var all: Bool
        /// Change lines as JSON.
        var json: Bool
        /// Draw the dashboard (stdout is a terminal) instead of printing change lines.
        var dashboard: Bool
        /// Colour in the dashboard.
        var color: Bool
        /// Time between polls.
        var interval: Duration
    }

    let configuration: Configuration
    let store: OperatorStore
    /// The file watched, to notice its deletion; `nil` for a PostgreSQL database.
    let database: DatabaseFileIdentity?

    private enum Event {
        case tick
        case signal(Int32)
    }

    /// Runs until the end (see the type's description).
    ///
    /// - Throws: ``CLIError`` when a watched task did not complete, the database was deleted or a read failed;
    ///   `ExitCode` 128 + the signal's number after SIGINT or SIGTERM on the dashboard.
    func run() async throws {
        let untilDone = configuration.untilDone || configuration.taskID != nil
        var follower = TaskFollower(
            taskID: configuration.taskID, wholeTrees: configuration.dashboard || configuration.all,
            since: Date.now.addingTimeInterval(-0.001))
        let rates = ProgressRates()
        var changeLines = ChangeLines(json: configuration.json, all: configuration.all)
        var lastFrame: [String] = []

        let signals = WatchSignals(configuration.dashboard ? [SIGINT, SIGTERM, SIGWINCH, SIGTSTP, SIGCONT] : [])
        defer { signals.cancel() }
        let terminal = configuration.dashboard ? WatchTerminal() : nil
        terminal?.enter()
        defer { terminal?.leave() }

        let (events, continuation) = AsyncStream.makeStream(of: Event.self)
        try await withThrowingTaskGroup(of: Void.self) { group in
            defer { group.cancelAll() }
            group.addTask { [interval = configuration.interval] in
                while !Task.isCancelled {
                    continuation.yield(.tick)
                    try await Task.sleep(for: interval)
                }
            }
            group.addTask { [signalEvents = signals.events] in
                for await number in signalEvents { continuation.yield(.signal(number)) }
            }

            for await event in events {
                if case .signal(let number) = event {
                    try handle(signal: number, terminal: terminal)
                    lastFrame = []  // Resized, or back from a stop: draw the whole frame again.
                }
                try database?.check()
                let changed = try await follower.refresh(from: store)
                let now = Date.now

                if untilDone, follower.followed.isEmpty {
                    terminal?.leave()
                    Terminal.standardError("nothing to watch: no pending, running or paused tasks")
                    return
                }
                if let terminal {
                    let size = WatchTerminal.size()
                    let frame = Dashboard.render(
                        trees(follower, rates), size: size, now: now, color: configuration.color)
                    if frame != lastFrame { terminal.draw(frame, size: size) }
                    lastFrame = frame
                } else if changed {
                    for line in changeLines.lines(for: follower.followed, rates: rates) { Terminal.output(line) }
                }
                if untilDone, follower.allFinished {
                    try end(follower.followed.map { $0[0] }, lastFrame: lastFrame, terminal: terminal)
                    return
                }
            }
        }
    }

    /// SIGINT and SIGTERM end the watch (the terminal is given back by `run`'s clean-up); SIGTSTP gives the
    /// terminal back, stops the process as the default action would, and takes the terminal again once continued.
    private func handle(signal number: Int32, terminal: WatchTerminal?) throws {
        switch number {
        case SIGINT, SIGTERM:
            throw ExitCode(128 + number)
        case SIGTSTP:
            terminal?.leave()
            kill(getpid(), SIGSTOP)
            terminal?.enter()
        default:
            break
        }
    }

    /// Every watched task finished: leaves the last frame on the normal screen, and fails unless all completed.
    private func end(_ roots: [TaskRecord], lastFrame: [String], terminal: WatchTerminal?) throws {
        if let terminal {
            terminal.leave()
            Terminal.write(lastFrame.map { $0.trimmingTrailingSpaces() + "\n" }.joined())
        }
        let unsuccessful = roots.filter { $0.status != .completed }.sorted { $0.id < $1.id }
        guard unsuccessful.isEmpty else {
            throw CLIError(unsuccessful.map { "task '\($0.id)' \($0.status)" }.joined(separator: ", "))
        }
    }

    private func trees(_ follower: TaskFollower, _ rates: ProgressRates) -> [Dashboard.Tree] {
        follower.followed.map { nodes in
            Dashboard.Tree(nodes: nodes, rate: rates.rate(of: nodes[0]), timeLeft: rates.timeLeft(of: nodes[0]))
        }
    }
}
