/// Lets at most `width` files be read at once across a whole job, granting free slots to the waiting file that
/// comes first in path order.
///
/// A file's step is pushed once it holds a slot, so that only the files being read run (the folder declared their
/// total bytes up front, so its progress weighs every file by size all the same).
actor ReadSlots {
    private let width: Int
    private var active = 0
    private var waiters: [(order: Int, continuation: CheckedContinuation<Void, Never>)] = []

    init(width: Int) {
        self.width = max(1, width)
    }

    /// Waits for a slot; `order` ranks waiters (lower first). Pair with ``release()``.
    func acquire(order: Int) async {
        if active < width, waiters.isEmpty {
            active += 1
            return
        }
        await withCheckedContinuation { continuation in
            let index = waiters.firstIndex { $0.order > order } ?? waiters.endIndex
            waiters.insert((order, continuation), at: index)
        }
    }

    func release() {
        if waiters.isEmpty {
            active -= 1
        } else {
            waiters.removeFirst().continuation.resume()
        }
    }

    /// Runs `body` holding a slot.
    func withSlot<T: Sendable>(order: Int, _ body: @Sendable () async throws -> T) async throws -> T {
        await acquire(order: order)
        defer { release() }
        try Task.checkCancellation()
        return try await body()
    }
}
