import Foundation
import Progression
import Synchronization

/// A store that fails on purpose: it passes every call to the store it wraps, except the ones its ``FaultPlan`` says
/// to fail, which throw a storage error (a full disk, an I/O error, a lock held too long) before anything is written.
/// The fault-injection suite and the executor's fault tests run the executor on it.
///
/// ```swift
/// let store = FaultInjectingStore(wrapping: try SQLiteTaskStore(path: path))
/// store.plan.failNextWrites(3, with: .diskFull)
/// ```
package final class FaultInjectingStore: TaskStoreForwarding {
    /// The errors a storage fault throws: what SQLite reports for them, as `TaskStoreError`s.
    package enum Fault: String, Sendable, CaseIterable {
        case diskFull, ioError, busy

        package var error: TaskStoreError {
            switch self {
            case .diskFull:
                TaskStoreError(.storageFailure, message: "database or disk is full (injected)", sqliteCode: 13)
            case .ioError:
                TaskStoreError(.storageFailure, message: "disk I/O error (injected)", sqliteCode: 10)
            case .busy:
                TaskStoreError(.busy, message: "database is locked (injected)", sqliteCode: 5)
            }
        }
    }

    /// Which calls fail.
    package final class FaultPlan: Sendable {
        private struct State {
            var failingWrites = 0
            var failingReads = 0
            var fault = Fault.diskFull
            var failingTrees: [String: Int] = [:]
            var outage: (until: ContinuousClock.Instant, fault: Fault)?
            var random: (generator: SplitMix64, probability: Double, length: Duration)?
            var injected = 0
        }

        private let state = Mutex(State())

        /// The next `count` calls that write fail with `fault`.
        package func failNextWrites(_ count: Int, with fault: Fault = .diskFull) {
            state.withLock {
                $0.failingWrites = count
                $0.fault = fault
            }
        }

        /// The next `count` calls that read fail with `fault`.
        package func failNextReads(_ count: Int, with fault: Fault = .ioError) {
            state.withLock {
                $0.failingReads = count
                $0.fault = fault
            }
        }

        /// Loading the tree of `id` fails `count` times.
        package func failTree(of id: String, times count: Int) {
            state.withLock { $0.failingTrees[id] = count }
        }

        /// Every call fails with `fault` for `duration` from now (a full disk until space is freed).
        package func outage(_ fault: Fault, for duration: Duration) {
            state.withLock { $0.outage = (.now + duration, fault) }
        }

        /// From now on, each write starts an outage of `length` with probability `probability` (reproducible for a
        /// seed), of a fault chosen at random.
        package func randomOutages(seed: UInt64, probability: Double, length: Duration) {
            state.withLock { $0.random = (SplitMix64(seed: seed), probability, length) }
        }

        /// Stops failing.
        package func heal() {
            state.withLock {
                $0.failingWrites = 0
                $0.failingReads = 0
                $0.failingTrees = [:]
                $0.outage = nil
                $0.random = nil
            }
        }

        /// How many calls failed on purpose so far.
        package var injected: Int { state.withLock { $0.injected } }

        /// The error for a call, or `nil` to let it through.
        func fault(writes: Bool, tree: String? = nil) -> TaskStoreError? {
            state.withLock { state in
                let now = ContinuousClock.now
                if let outage = state.outage {
                    if now < outage.until {
                        state.injected += 1
                        return outage.fault.error
                    }
                    state.outage = nil
                }
                if let tree, let left = state.failingTrees[tree], left > 0 {
                    state.failingTrees[tree] = left - 1
                    state.injected += 1
                    return Fault.ioError.error
                }
                if writes, state.failingWrites > 0 {
                    state.failingWrites -= 1
                    state.injected += 1
                    return state.fault.error
                }
                if !writes, state.failingReads > 0 {
                    state.failingReads -= 1
                    state.injected += 1
                    return state.fault.error
                }
                if writes, var random = state.random {
                    let draw = Double(random.generator.next() % 1_000_000) / 1_000_000
                    let pick = Fault.allCases[Int(random.generator.next() % UInt64(Fault.allCases.count))]
                    state.random = random
                    if draw < random.probability {
                        state.outage = (now + random.length, pick)
                        state.injected += 1
                        return pick.error
                    }
                }
                return nil
            }
        }
    }

    package let inner: any TaskStoreBackend
    package let plan = FaultPlan()

    package init(wrapping inner: any TaskStoreBackend) {
        self.inner = inner
    }

    /// Fails the call when the plan says so (before anything is written), or passes it to the wrapped store.
    package func forward<T: Sendable>(
        _ call: ForwardedCall, _ body: @Sendable (any TaskStoreBackend) async throws -> T
    ) async throws -> T {
        let fault =
            switch call {
            case .read: plan.fault(writes: false)
            case .readTree(let id): plan.fault(writes: false, tree: id)
            case .write: plan.fault(writes: true)
            }
        if let fault { throw fault }
        return try await body(inner)
    }
}
