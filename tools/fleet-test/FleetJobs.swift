import Foundation
import Progression

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
