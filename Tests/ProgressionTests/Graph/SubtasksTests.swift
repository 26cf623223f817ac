import Foundation
import Testing

@testable import Progression

/// Subtasks on the graph alone (`Subtasks.swift`): a step started, found again by name and occurrence when its parent
/// runs again (skipped when it completed, with a result the caller can use), reports, and durable sleeps.
struct SubtasksTests {
    static let now = Date(timeIntervalSince1970: 1_000)

    /// A running job whose tree is in memory as stored: steps `a` (completed, result 7), `a` again (failed) and `b`.
    static func jobRunAgain() -> (GraphState, TaskNode) {
        var state = GraphState.alone(slots: 1)
        let root = state.addRoot(
            TaskRecord(id: "job", name: "job", kind: "k", status: .running, createdAt: now), stored: true)
        root.body = { _ in nil }
        func step(_ number: Int, _ name: String, occurrence: Int, _ status: TaskStatus, result: Data? = nil) {
            _ = state.attachStored(
                TaskRecord(
                    id: "job.\(number)", parentID: "job", rootID: "job", name: name, occurrence: occurrence,
                    status: status, result: result, createdAt: now),
                to: root)
        }
        step(1, "a", occurrence: 0, .completed, result: Data("7".utf8))
        step(2, "a", occurrence: 1, .failed)
        step(3, "b", occurrence: 0, .completed, result: Data("8".utf8))
        return (state, root)
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        /// The steps pushed, in order, each with whether the caller accepts a stored result.
        var pushes: [(name: String, accepts: Bool)]
        /// For each push: the id of the step and whether it is skipped (its stored result returned).
        var outcome: [(id: String, skipped: Bool)]
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(
            name: "a completed step is skipped, a failed one runs again, by name and occurrence",
            pushes: [("a", true), ("a", true)], outcome: [("job.1", true), ("job.2", false)]),
        Row(
            name: "a stored result the caller cannot use runs the step again",
            pushes: [("b", false)], outcome: [("job.3", false)]),
        Row(
            name: "a new name or a further occurrence is a new step, numbered after the others",
            pushes: [("c", true), ("a", true), ("a", true), ("a", true)],
            outcome: [("job.4", false), ("job.1", true), ("job.2", false), ("job.5", false)]),
    ]

    @Test(arguments: rows)
    func aStepIsFoundAgainByNameAndOccurrence(_ row: Row) throws {
        var (state, root) = Self.jobRunAgain()
        var seen: [(id: String, skipped: Bool)] = []
        for push in row.pushes {
            let start = try state.startChild(
                of: root.handle, name: push.name, weight: 1, options: nil, now: Self.now,
                accepts: { _ in push.accepts })
            switch start {
            case .completed(let handle, let result):
                let node = try #require(state.node(handle))
                #expect(result == node.record.result)
                seen.append((node.record.id, true))
            case .run(let handle):
                let node = try #require(state.node(handle))
                #expect(node.record.status == .running, "its start is staged")
                #expect(node.staged?.status == .running)
                seen.append((node.record.id, false))
            }
        }
        #expect(seen.map(\.id) == row.outcome.map(\.id))
        #expect(seen.map(\.skipped) == row.outcome.map(\.skipped))
    }

    @Test func aStepUnderARemovedParentIsRefused() {
        var (state, root) = Self.jobRunAgain()
        state.removeRoot(root)
        #expect(throws: ProgressionError.self) {
            try state.startChild(of: root.handle, name: "a", weight: 1, options: nil, now: Self.now, accepts: nil)
        }
    }

    /// A report's step name is written once, with an event; its amounts move the progress; it says whether the code
    /// is to wait (paused) and whether the writer was idle.
    @Test func aReportWritesItsStepOnceAndSaysWhatTheCodeIsToDo() throws {
        var state = GraphState.alone(slots: 1)
        let root = state.addRoot(
            TaskRecord(id: "job", name: "job", kind: "k", status: .running, createdAt: Self.now), stored: true)
        let first = try state.report(root.handle, TaskProgress(name: "reading", fraction: 0.25), now: Self.now)
        #expect(first.wakeWriter && !first.paused)
        #expect(root.record.step == "reading")
        #expect(root.record.progress == 0.25)
        let second = try state.report(root.handle, TaskProgress(name: "reading", fraction: 0.5), now: Self.now)
        #expect(!second.wakeWriter, "the writer has work already")
        #expect(state.events.filter { $0.kind == .step }.count == 1, "the same step is not written twice")
        root.record.status = .paused
        #expect(try state.report(root.handle, TaskProgress(name: "writing"), now: Self.now).paused)
    }

    struct SleepRow: Sendable, CustomTestStringConvertible {
        var name: String
        var job: Bool
        var wakesIn: Double
        /// `nil`: refused.
        var sleeps: Bool?
        var testDescription: String { name }
    }

    static let sleepRows: [SleepRow] = [
        SleepRow(name: "a job sleeping until later stops until then", job: true, wakesIn: 60, sleeps: true),
        SleepRow(name: "a job whose wake time has come goes on", job: true, wakesIn: 0, sleeps: false),
        SleepRow(name: "a closure task cannot sleep durably", job: false, wakesIn: 60, sleeps: nil),
    ]

    @Test(arguments: sleepRows)
    func aDurableSleepStopsTheJobUntilItsTime(_ row: SleepRow) throws {
        var state = GraphState.alone(slots: 1)
        let root = state.addRoot(
            TaskRecord(id: "job", name: "job", kind: row.job ? "k" : nil, status: .running, createdAt: Self.now),
            stored: true)
        root.body = { _ in nil }
        let wake = Self.now.addingTimeInterval(row.wakesIn)
        guard let sleeps = row.sleeps else {
            #expect(throws: ProgressionError.self) { try state.sleep(root, until: wake, name: "nap", now: Self.now) }
            return
        }
        let decision = try state.sleep(root, until: wake, name: "nap", now: Self.now)
        let step = try #require(state.node(id: "job.1"))
        #expect(step.record.name == "nap")
        switch decision {
        case .sleep:
            #expect(sleeps)
            #expect(root.stopReason == .sleeping(until: wake))
            #expect(step.record.nextAttemptAt == wake)
        case .done:
            #expect(!sleeps)
            #expect(step.record.status == .completed)
        }
    }
}
