import Foundation
import Progression
import Synchronization

/// The version the worker was told its hang and double kinds' code is (`worker --job-version`), read as they register.
enum FleetVersion {
    static let current = Mutex<JobVersion?>(nil)
}

/// A job that doubles its number, after `delayMilliseconds` of work, and says which worker ran it.
struct DoubleJob: JobKind {
    struct Input: Codable, Sendable {
        var n: Int
        var delayMilliseconds = 0
    }
    struct Output: Codable, Sendable {
        var doubled: Int
        var worker: String
    }
    static let name = "fleet.double"
    static let options = TaskOptions.interactive
    static var version: JobVersion? { FleetVersion.current.withLock { $0 } }
    let worker: String
    let ledger: Ledger

    func run(_ input: Input, context: any TaskContext) async throws -> Output {
        ledger.append("double \(context.taskID) \(worker)")
        if input.delayMilliseconds > 0 { try await Task.sleep(for: .milliseconds(input.delayMilliseconds)) }
        return Output(doubled: input.n * 2, worker: worker)
    }
}

/// A job of two steps with a durable sleep between them: step A, sleep, step B. Each step writes a ledger line once
/// it runs, so a step run again after its completion shows twice.
struct StepsJob: JobKind {
    struct Input: Codable, Sendable {
        var sleepMilliseconds = 0
    }
    struct Output: Codable, Sendable {
        var worker: String
    }
    static let name = "fleet.steps"
    static let options = TaskOptions.interactive
    let worker: String
    let ledger: Ledger

    func run(_ input: Input, context: any TaskContext) async throws -> Output {
        let id = context.taskID
        let worker = worker
        let ledger = ledger
        try await context.push("A") { _ in ledger.append("A \(id) \(worker)") }
        if input.sleepMilliseconds > 0 {
            ledger.append("sleep \(id) \(worker)")
            try await context.sleep(for: .milliseconds(input.sleepMilliseconds))
        }
        try await context.push("B") { _ in ledger.append("B \(id) \(worker)") }
        return Output(worker: worker)
    }
}

/// A schedule's job: a ledger line per run.
struct TickJob: JobKind {
    struct Input: Codable, Sendable {}
    static let name = "fleet.tick"
    let worker: String
    let ledger: Ledger

    func run(_ input: Input, context: any TaskContext) async throws {
        ledger.append("tick \(context.taskID) \(worker)")
    }
}

/// Lines appended to a file, one write each (O_APPEND): several processes share one ledger.
final class Ledger: Sendable {
    let path: String

    init(path: String) {
        self.path = path
    }

    func append(_ line: String) {
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT, 0o644)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }
}

/// A parent job: starts `count` `fleet.leaf` children (one transaction), waits for them without a slot, and returns the
/// sum of their outputs. Ledger: `run PARENT WORKER` each time its code runs (a wait ends one run), `started PARENT N`
/// once its children's start is committed, `sum PARENT S` at its end.
struct FanoutJob: JobKind {
    struct Input: Codable, Sendable {
        var count: Int
        var leafDelayMilliseconds = 0
        /// Children awaited as they finish (each one's output summed as it comes) instead of all at once.
        var each = false
        /// The first this many children take no time.
        var quickLeaves = 0
    }
    struct Output: Codable, Sendable { var sum: Int }
    static let name = "fleet.fanout"
    static let options = TaskOptions.interactive.retryable()
    let worker: String
    let ledger: Ledger

    func run(_ input: Input, context: any TaskContext) async throws -> Output {
        let id = context.taskID
        ledger.append("run \(id) \(worker)")
        try await context.report(.total(Double(input.count)))
        let children = try await context.startChildren(
            LeafJob.self,
            inputs: (0..<input.count).map {
                LeafJob.Input(n: $0, delayMilliseconds: $0 < input.quickLeaves ? 0 : input.leafDelayMilliseconds)
            }
        ) { leaf in ChildJobOptions(name: "leaf \(leaf.n)") }
        ledger.append("started \(id) \(children.count)")
        var sum = 0
        if input.each {
            for try await done in context.completions(of: children) { sum += try done.output().value }
        } else {
            sum = try await context.results(of: children).reduce(0) { $0 + $1.value }
        }
        ledger.append("sum \(id) \(sum)")
        return Output(sum: sum)
    }
}

/// A child job of two steps, A and B, with `delayMilliseconds` of work in each; returns n × 2. Ledger, per step:
/// `begin CHILD/A WORKER` when its code starts, `committed CHILD/A` once its completion is committed (its push
/// returned): a step that begins again after its `committed` line ran again after its completion was committed.
struct LeafJob: JobKind {
    struct Input: Codable, Sendable {
        var n: Int
        var delayMilliseconds = 0
    }
    struct Output: Codable, Sendable { var value: Int }
    static let name = "fleet.leaf"
    static let options = TaskOptions.interactive.retryable()
    let worker: String
    let ledger: Ledger

    func run(_ input: Input, context: any TaskContext) async throws -> Output {
        let id = context.taskID
        let (worker, ledger) = (worker, ledger)
        for step in ["A", "B"] {
            try await context.push(step) { stepContext in
                ledger.append("begin \(id)/\(step) \(worker)")
                do {
                    if input.delayMilliseconds > 0 {
                        // In pieces, reporting each: a paused or cancelled job stops at its next report.
                        let pieces = max(1, input.delayMilliseconds / 50)
                        for piece in 0..<pieces {
                            try await Task.sleep(for: .milliseconds(input.delayMilliseconds / pieces))
                            try await stepContext.report(.progress(Double(piece + 1) / Double(pieces)))
                        }
                    }
                } catch {
                    ledger.append("stopped \(id)/\(step) \(worker)")
                    throw error
                }
            }
            ledger.append("committed \(id)/\(step)")
        }
        return Output(value: input.n * 2)
    }
}

/// A job that waits for the signal `go` (a string payload) and returns it. Ledger: `gate-begin ID WORKER` when its
/// step before the wait runs, `gate ID PAYLOAD WORKER` once it has the signal.
struct GateJob: JobKind {
    struct Input: Codable, Sendable { var delayMilliseconds = 0 }
    static let name = "fleet.gate"
    static let options = TaskOptions.interactive.retryable()
    let worker: String
    let ledger: Ledger

    func run(_ input: Input, context: any TaskContext) async throws -> String {
        let id = context.taskID
        let (worker, ledger) = (worker, ledger)
        try await context.push("before") { _ in
            ledger.append("gate-begin \(id) \(worker)")
            if input.delayMilliseconds > 0 { try await Task.sleep(for: .milliseconds(input.delayMilliseconds)) }
        }
        let payload = try await context.signal("go", as: String.self)
        ledger.append("gate \(id) \(payload) \(worker)")
        return payload
    }
}

/// A job that moves `moves` times (a report every `moveMilliseconds`), then hangs — its code waits for ever, as on a
/// network call that never answers — in its first `hangingAttempts` attempts, and completes in the next. The stall
/// rule comes with the options it is submitted with. `laterMoves`, when set, is the number of moves of every attempt
/// after the first (a test that pauses the first attempt gives it more moves than any machine runs before the pause
/// lands). Ledger: `hang-begin ID ATTEMPT WORKER` as an attempt begins, `hang-moved ID N` after each report,
/// `hang-done ID WORKER` when it completes.
struct HangJob: JobKind {
    struct Input: Codable, Sendable {
        var moves = 0
        var moveMilliseconds = 100
        var hangingAttempts = 1
        var laterMoves: Int?
    }
    static let name = "fleet.hang"
    static let options = TaskOptions.interactive.retryable()
    static var version: JobVersion? { FleetVersion.current.withLock { $0 } }
    let worker: String
    let ledger: Ledger

    func run(_ input: Input, context: any TaskContext) async throws -> String {
        let id = context.taskID
        // The attempts so far, counted in the checkpoint (the context does not say which attempt this is).
        let attempt = (try context.lastCheckpoint(as: Int.self) ?? 0) + 1
        try await context.checkpoint(attempt)
        ledger.append("hang-begin \(id) \(attempt) \(worker)")
        let moves = attempt > 1 ? input.laterMoves ?? input.moves : input.moves
        for move in 0..<moves {
            try await Task.sleep(for: .milliseconds(input.moveMilliseconds))
            try await context.report(.progress(Double(move + 1) / Double(moves + 1)))
            ledger.append("hang-moved \(id) \(move + 1)")
        }
        if attempt <= input.hangingAttempts {
            try await Task.sleep(for: .seconds(86_400))
        }
        ledger.append("hang-done \(id) \(worker)")
        return worker
    }
}
