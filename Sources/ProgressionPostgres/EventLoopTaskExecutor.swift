#if PostgreSQL
import NIOCore

/// Runs a task's jobs on one NIO event loop: a store call that prefers it (`withTaskExecutorPreference`) runs its
/// statements on the thread of its connection's event loop, where postgres-nio answers them. Without it, each
/// statement's answer resumed the call on Swift's cooperative pool, a hand-off between threads in each direction, for
/// every statement. What the call computes between its statements (encoding parameters, decoding rows) runs on that
/// thread too, so a call that decodes much delays the other connections of its event loop meanwhile; the store's calls
/// never block (no lock is held across an `await`, nothing waits synchronously).
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
