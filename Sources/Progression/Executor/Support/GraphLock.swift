#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The graph's lock: a value behind one of the C library's default mutexes.
///
/// Not `Synchronization.Mutex`, whose Linux implementation spins on a contended lock and then blocks on a
/// priority-inheritance futex (`FUTEX_LOCK_PI`, which the kernel serves through an `rt_mutex`). The graph's lock is
/// entered about twenty times a job from the cooperative pool's threads, the writer's queue and the run tasks; on a
/// machine with fewer cores than busy threads its holder is often descheduled, and both the spin and the PI futex's
/// hand-off cost more than a plain futex wait: profiled natively, `Mutex._lockSlow` and the kernel's `rt_mutex` took
/// 9–10 % of the in-memory jobs loop (docs/performance.md, "Eleventh pass"). An experiment: measured slower, and
/// taken back by the next commit.
///
/// - Note: `@unchecked Sendable` is sound because the value is reached only in ``withLock(_:)``, between the mutex's
///   lock and unlock, through an `inout` that the body cannot let escape; the mutex and the value live in memory of
///   their own that never moves (a `pthread_mutex_t` must not be moved once initialized) and is freed only in
///   `deinit`, when no other reference exists.
final class GraphLock<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let value: UnsafeMutablePointer<Value>

    init(_ initial: consuming Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        // PTHREAD_MUTEX_ADAPTIVE_NP spins a little before it waits; `nil` attributes (a default mutex) do not spin.
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        let code = pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        precondition(code == 0, "pthread_mutex_init failed: \(code)")
        value = .allocate(capacity: 1)
        value.initialize(to: initial)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        value.deinitialize(count: 1)
        value.deallocate()
    }

    /// Runs `body` with the value, the mutex held. `body` must not enter this lock again (a default mutex deadlocks).
    func withLock<T, E: Error>(_ body: (inout Value) throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}
