import Synchronization

/// A one-shot signal: tasks wait until the test opens it; once open it stays open.
///
/// ```swift
/// let release = Gate()
/// let work = Task { await release.wait(); return "released" }
/// release.open()
/// #expect(await work.value == "released")
/// ```
public final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// A closed gate.
    public init() {}

    /// Opens the gate: wakes every waiter, and later waits return at once.
    public func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Waits until the gate is open.
    public func wait() async {
        await withCheckedContinuation { continuation in
            let open = state.withLock { state in
                if !state.open { state.waiters.append(continuation) }
                return state.open
            }
            if open { continuation.resume() }
        }
    }
}
