import Dispatch

/// A serial executor backed by a dispatch queue of its own.
///
/// The actor that owns a SQLite connection runs on it, so a statement that blocks (waiting on the busy timeout, or on
/// the disk) blocks this queue's thread and never a thread of Swift's cooperative pool.
///
/// It is a task executor too: a task that prefers it (`withTaskExecutorPreference`) runs on the queue, isolated to it
/// as the actor's own jobs are, so that its calls into the actor run at once, without a switch of thread either way.
/// Only loops that call the store in turn and compute little between calls prefer it (their work delays the store's
/// statements meanwhile); never task code.
package final class DispatchSerialExecutor: SerialExecutor, TaskExecutor {
    private let queue: DispatchQueue

    package init(label: String) {
        queue = DispatchQueue(label: label)
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        let taskExecutor = asUnownedTaskExecutor()
        queue.async {
            job.runSynchronously(isolatedTo: executor, taskExecutor: taskExecutor)
        }
    }

    package func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }
}
