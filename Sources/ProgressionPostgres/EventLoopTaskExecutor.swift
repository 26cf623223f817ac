#if PostgreSQL
import NIOCore

/// Runs a task's jobs on one NIO event loop: a store call that prefers it (`withTaskExecutorPreference`) runs its
/// statements on the thread of its connection's event loop, where postgres-nio answers them. Without it, each
/// statement's answer resumed the call on Swift's cooperative pool, a hand-off between threads in each direction, for
/// every statement.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}
#endif
