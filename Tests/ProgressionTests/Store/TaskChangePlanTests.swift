import Foundation
import Testing

@testable import Progression

/// A lifecycle change planned over a stored subtree, without a store (`TaskChangeRequest.plan(over:path:)`): what the
/// three stores carry out. The store suite (`TaskStoreTests`) runs the same changes through each store.
struct TaskChangePlanTests {
    static let at = Date(timeIntervalSince1970: 2_000)

    /// A pending root held by no owner, with a running step, a completed step and a step waiting for a time.
    static func subtree() -> [TaskRecord] {
        let created = Date(timeIntervalSince1970: 1_000)
        return [
            TaskRecord(id: "root", name: "root", kind: "job", status: .pending, createdAt: created),
            TaskRecord(
                id: "root.1", parentID: "root", rootID: "root", name: "running", status: .running, createdAt: created,
                startedAt: created),
            TaskRecord(
                id: "root.2", parentID: "root", rootID: "root", name: "done", status: .completed, createdAt: created,
                startedAt: created, finishedAt: created),
            TaskRecord(
                id: "root.3", parentID: "root", rootID: "root", name: "later", status: .pending, createdAt: created,
                nextAttemptAt: Date(timeIntervalSince1970: 9_000)),
        ]
    }

    static func request(
        _ transition: TaskLifecycle.Transition, expecting status: TaskStatus? = nil, owner: String?? = nil
    ) -> TaskChangeRequest {
        TaskChangeRequest(
            taskID: "root", transition: transition, requester: .operatorWithoutOwner, expectedStatus: status,
            checksOwner: owner != nil, expectedOwner: owner ?? nil, at: at)
    }

    @Test func aCancelEndsTheUnfinishedDescendantsWithItsOneEvent() throws {
        guard case .write(let batch, let result) = try Self.request(.cancel).plan(over: Self.subtree(), path: nil)
        else {
            Issue.record("a cancel writes")
            return
        }
        #expect(batch.updates.map(\.record.id) == ["root", "root.1", "root.3"])
        #expect(batch.updates.allSatisfy { $0.record.status == .cancelled })
        #expect(batch.events.map(\.taskID) == ["root"])
        #expect(result.cascaded == 2)
        #expect(result.before.status == .pending && result.after?.status == .cancelled)
    }

    @Test func runNowBringsTheWaitingDescendantsTimeToNow() throws {
        var nodes = Self.subtree()
        nodes[0].nextAttemptAt = Date(timeIntervalSince1970: 5_000)
        guard case .write(let batch, let result) = try Self.request(.runNow).plan(over: nodes, path: nil) else {
            Issue.record("run now writes")
            return
        }
        #expect(batch.updates.map(\.record.id) == ["root", "root.3"])
        #expect(batch.updates.map(\.record.nextAttemptAt) == [nil, Self.at])
        #expect(result.cascaded == 1)
    }

    @Test func aRemovalDeletesTheWholeSubtreeAndWritesNothing() throws {
        var nodes = Self.subtree()
        nodes[0].status = .cancelled
        nodes[0].finishedAt = Self.at
        guard case .delete(let deleted, let result) = try Self.request(.remove).plan(over: nodes, path: nil) else {
            Issue.record("a removal deletes")
            return
        }
        #expect(deleted.map(\.id) == nodes.map(\.id))
        #expect(result.deleted == 4 && result.after == nil)
    }

    /// Refusals: no task, a task that changed since it was read (status or owner), and the lifecycle's own.
    @Test func refusalsAreTypedAndPlanNothing() {
        #expect(throws: TaskStoreError.self) { try Self.request(.cancel).plan(over: [], path: nil) }
        let changedStatus = #expect(throws: TaskStoreError.self) {
            try Self.request(.cancel, expecting: .running).plan(over: Self.subtree(), path: nil)
        }
        #expect(changedStatus?.reason == .conflict)
        let changedOwner = #expect(throws: TaskStoreError.self) {
            try Self.request(.cancel, owner: .some("someone")).plan(over: Self.subtree(), path: nil)
        }
        #expect(changedOwner?.reason == .conflict)
        #expect(throws: ProgressionError.self) { try Self.request(.remove).plan(over: Self.subtree(), path: nil) }
    }
}
