import Foundation
import Synchronization

/// Root ids for one executor: values of the store's sequence, reserved a block at a time (one transaction per block,
/// off the commit path of the jobs), the block growing while ids are taken quickly. While the store fails, a
/// reservation is tried again with backoff: a submit waits, as it waits for its commit.
final class IdentifierPool: Sendable {
    private struct State {
        var available: Range<Int64> = 0..<0
        var blockSize = 16
        var lastRefill: Duration?
        var refilling = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())
    private let store: any TaskStoreCore
    private let clock: TaskClock
    private let onFailure: @Sendable (any Error) -> Void
    static let maximumBlock = 4096

    init(store: any TaskStoreCore, clock: TaskClock, onFailure: @escaping @Sendable (any Error) -> Void) {
        self.store = store
        self.clock = clock
        self.onFailure = onFailure
    }

    /// A new root id.
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled while the store fails.
    func next() async throws -> String {
        while true {
            enum Step { case value(Int64), refill(Int), wait }
            let step = state.withLock { state -> Step in
                if let value = state.available.first {
                    state.available = state.available.dropFirst()
                    return .value(value)
                }
                if state.refilling { return .wait }
                state.refilling = true
                let now = clock.now()
                if let last = state.lastRefill, now - last < .seconds(1) {
                    state.blockSize = min(Self.maximumBlock, state.blockSize * 2)
                }
                state.lastRefill = now
                return .refill(state.blockSize)
            }
            switch step {
            case .value(let value):
                return TaskIdentifier.root(value)
            case .wait:
                await withCheckedContinuation { continuation in
                    let ready = state.withLock { state -> Bool in
                        guard state.refilling else { return true }
                        state.waiters.append(continuation)
                        return false
                    }
                    if ready { continuation.resume() }
                }
            case .refill(let count):
                try await refill(count)
            }
        }
    }

    private func refill(_ count: Int) async throws {
        var failures = 0
        defer {
            let waiters = state.withLock { state in
                state.refilling = false
                defer { state.waiters.removeAll() }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
        while true {
            do {
                let range = try await store.reserveIdentifiers(count)
                state.withLock { $0.available = range }
                return
            } catch {
                try Task.checkCancellation()
                onFailure(error)
                failures += 1
                try await clock.sleep(StoreWriter.backoff(afterFailures: failures))
            }
        }
    }
}
