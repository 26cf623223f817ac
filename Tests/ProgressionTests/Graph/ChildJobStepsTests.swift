import Foundation
import Testing

@testable import Progression

/// Child jobs and durable waits on the graph alone (`ChildJobSteps.swift`): children placed and created with their
/// links, an await decided from the links, the children's rows followed into their links, and a signal's step.
struct ChildJobStepsTests {
    static let now = Date(timeIntervalSince1970: 1_000)

    static func runningJob(kind: String? = "parent") -> (GraphState, TaskNode) {
        var state = GraphState.alone(slots: 1)
        let root = state.addRoot(
            TaskRecord(id: "p", name: "p", kind: kind, status: .running, createdAt: now), stored: true)
        root.body = { _ in nil }
        return (state, root)
    }

    /// Two children started: each a root of its own to insert (unowned, its parent's id), with a link under the
    /// node that started it; the ids come from the block given.
    static func startTwo(_ state: inout GraphState, under root: TaskNode) throws -> ChildJobsStarted {
        let requests = [
            ChildJobRequest(kind: "child", input: Data("{}".utf8), name: "one"),
            ChildJobRequest(kind: "child", input: Data("{}".utf8), name: "two"),
        ]
        let slots = try state.placeChildJobs(under: root.handle, names: requests.map(\.name))
        return try state.createChildJobs(
            under: root.handle, requests, slots: slots, identifiers: 40..<42, kindOptions: [:], earlierChildren: [:],
            now: now)
    }

    @Test func childrenAreRootsOfTheirOwnWithALinkUnderTheirParent() throws {
        var (state, root) = Self.runningJob()
        let started = try Self.startTwo(&state, under: root)
        #expect(started.references.map(\.name) == ["one", "two"])
        #expect(started.references.map(\.id) == [TaskIdentifier.root(40), TaskIdentifier.root(41)])
        #expect(state.newChildJobs.map(\.parentJobID) == ["p", "p"])
        #expect(state.newChildJobs.allSatisfy { $0.ownerID == nil && $0.status == .pending })
        #expect(root.links.count == 2)
        #expect(root.children.map(\.record.childJobID) == started.references.map(\.id))
        #expect(started.restarts.isEmpty)
    }

    @Test func aClosureTaskCannotStartChildJobsWaitForThemOrForASignal() {
        var (state, root) = Self.runningJob(kind: nil)
        #expect(throws: ProgressionError.self) { try state.placeChildJobs(under: root.handle, names: ["one"]) }
        #expect(throws: ProgressionError.self) {
            try state.signalStep(under: root.handle, name: "go", deadline: nil, now: Self.now)
        }
    }

    struct AwaitRow: Sendable, CustomTestStringConvertible {
        var name: String
        var all: Bool
        var finished: [TaskStatus?]
        /// `nil`: the root stops to wait; else how many outcomes are returned.
        var returned: Int?
        var testDescription: String { name }
    }

    static let awaitRows: [AwaitRow] = [
        AwaitRow(name: "all, none finished: it waits", all: true, finished: [nil, nil], returned: nil),
        AwaitRow(name: "all, one finished: it waits", all: true, finished: [.completed, nil], returned: nil),
        AwaitRow(name: "all, both ended: both returned", all: true, finished: [.completed, .failed], returned: 2),
        AwaitRow(name: "the first, none finished: it waits", all: false, finished: [nil, nil], returned: nil),
        AwaitRow(name: "the first, one finished: it is returned", all: false, finished: [nil, .cancelled], returned: 1),
    ]

    /// An await is decided from the links: enough finished, their outcomes; else the root stops, what it waits for
    /// marked on the unfinished links.
    @Test(arguments: awaitRows)
    func anAwaitReturnsOrStopsTheRootByWhatTheLinksSay(_ row: AwaitRow) throws {
        var (state, root) = Self.runningJob()
        let started = try Self.startTwo(&state, under: root)
        var rows: [TaskRecord] = []
        for (reference, status) in zip(started.references, row.finished) {
            guard let status else { continue }
            rows.append(
                TaskRecord(
                    id: reference.id, name: reference.name, kind: "child", status: status, createdAt: Self.now,
                    finishedAt: Self.now, parentJobID: "p"))
        }
        state.applyChildRows(rows, now: Self.now)
        let decision = try state.awaitChildren(started.references.map(\.id), under: root.handle, all: row.all, now: Self.now)
        switch decision {
        case .done(let outcomes):
            #expect(outcomes.count == row.returned)
            #expect(root.stopReason == nil)
        case .wait:
            #expect(row.returned == nil)
            if case .awaiting? = root.stopReason {} else { Issue.record("the root does not stop to wait: \(String(describing: root.stopReason))") }
            let awaited = root.children.filter(\.record.awaited).compactMap(\.record.childJobID)
            let unfinished = zip(started.references, row.finished).filter { $0.1 == nil }.map(\.0.id)
            #expect(awaited == unfinished)
        }
        #expect(throws: ProgressionError.self) {
            try state.awaitChildren(["not-a-child"], under: root.handle, all: true, now: Self.now)
        }
    }

    /// A signal wait's step: made once, looked for, and ended by the signal taken (its payload the step's result), by
    /// its deadline (it fails), or by the root stopping to wait; a step received in an earlier run returns at once.
    @Test func aSignalStepEndsByItsSignalItsDeadlineOrAWait() throws {
        var (state, root) = Self.runningJob()
        let deadline = Self.now.addingTimeInterval(60)
        guard case .look(let look) = try state.signalStep(under: root.handle, name: "go", deadline: deadline, now: Self.now)
        else { Issue.record("a new signal step is looked for"); return }
        #expect(look.sequence != nil, "a new step is stored before its signal is taken")
        let step = try #require(state.node(look.step))
        #expect(step.record.name == "signal go")

        guard case .wait = try state.endSignalStep(look.step, name: "go", taken: nil, now: Self.now) else {
            Issue.record("no signal before its deadline: the root waits"); return
        }
        if case .timedOut = try state.endSignalStep(look.step, name: "go", taken: nil, now: deadline) {} else {
            Issue.record("its deadline passed: it fails")
        }
        #expect(step.record.status == .failed)

        let payload = Data("42".utf8)
        var (again, rootAgain) = Self.runningJob()
        guard case .look(let second) = try again.signalStep(under: rootAgain.handle, name: "go", deadline: nil, now: Self.now)
        else { Issue.record("looked for"); return }
        let signal = JobSignalRecord(sequence: 1, jobID: "p", name: "go", payload: payload, sentAt: Self.now)
        guard case .received(_, let received) = try again.endSignalStep(second.step, name: "go", taken: signal, now: Self.now)
        else { Issue.record("the signal was taken"); return }
        #expect(received == payload)
        #expect(again.node(second.step)?.record.status == .completed)
        // The job runs again: the step received in its earlier run returns its payload without waiting.
        rootAgain.nameCounts.removeAll()
        guard case .received(let stored) = try again.signalStep(under: rootAgain.handle, name: "go", deadline: nil, now: Self.now)
        else { Issue.record("received before"); return }
        #expect(stored == payload)
    }
}
