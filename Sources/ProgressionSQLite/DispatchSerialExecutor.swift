import Dispatch

/// A serial executor backed by a dispatch queue of its own.
///
/// The actor that owns a SQLite connection runs on it, so a statement that blocks (waiting on the busy timeout, or on
/// the disk) blocks this queue's thread and never a thread of Swift's cooperative pool.
package final class DispatchSerialExecutor: SerialExecutor {
    private let queue: DispatchQueue

    package init(label: String) {
        queue = DispatchQueue(label: label)
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async {
            job.runSynchronously(on: executor)
        }
    }

    package func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }
}
