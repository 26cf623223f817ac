import Foundation

/// Job trees' part of the write side: jobs that wait for others, signals, and the tree keeper, which carries what one
/// job's change means for the others of its tree (``JobTreeKeeper``).
///
/// Every write of a store queues the keeper's work in its own transaction (a child job's change to mirror in its
/// parent, a parent's end to carry to its children, a finished job's dependents): nothing of it is lost when a process
/// dies, and any process of the fleet carries it out with ``resolveJobTrees(at:limit:)``.
package protocol JobTreeStore: Sendable {
    /// Inserts new jobs with their events, and the dependencies of those among them that run after others, in one
    /// transaction. A job with dependencies is inserted waiting (``JobWait/jobs``); the tree keeper releases it once
    /// they have completed (or cancels it, by its policy, when one failed).
    ///
    /// - Throws: ``JobDependencyError`` when a dependency is not a job of the store (nothing is written then);
    ///   ``TaskStoreError`` `.conflict` as ``TaskWriting/insert(_:events:)``.
    func insert(_ tasks: [TaskRecord], events: [TaskEvent], dependencies: [JobDependency]) async throws

    /// Carries out up to `limit` queued changes of job trees in one transaction. Returns how many it took (0: none
    /// was queued).
    func resolveJobTrees(at now: Date, limit: Int) async throws -> Int

    /// Sends a signal to a job: it is kept until a wait step of the job takes it, and a job that waits for it now is
    /// released.
    ///
    /// - Throws: ``ProgressionError/notFound(taskID:)``, ``ProgressionError/invalidState(taskID:status:action:)`` for
    ///   a finished job or a subtask, ``ProgressionError/invalidArgument(_:)`` for a bad name; nothing is written then.
    func sendSignal(to jobID: String, name: String, payload: Data?, at date: Date) async throws -> JobSignalRecord

    /// The signal that the wait step `step` of a job takes: the one it took before (its job ran again), else the
    /// oldest of that name not taken yet, which is marked taken by it. `nil` when none waits.
    ///
    /// - Throws: ``TaskStoreError`` `.conflict` when `owner` no longer holds the job.
    func takeSignal(job: String, name: String, step: String, owner: String, at date: Date) async throws
        -> JobSignalRecord?

    /// Every signal sent to a job, oldest first.
    func signals(of jobID: String) async throws -> [JobSignalRecord]

    /// What a job was submitted after.
    func dependencies(of jobID: String) async throws -> [JobDependency]

    /// The jobs submitted after this one.
    func dependents(of jobID: String) async throws -> [JobDependency]

    /// The tasks of these ids that exist (in no particular order).
    func tasks(ids: [String]) async throws -> [TaskRecord]
}
