import Synchronization

/// A value behind a lock that escaping closures can share by reference (a `Mutex` itself cannot be captured).
final class SharedValue<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>

    init(_ value: Value) {
        storage = Mutex(value)
    }

    var value: Value {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }

    /// Changes the value under the lock.
    func update<T>(_ change: (inout Value) -> T) -> T {
        storage.withLock { change(&$0) }
    }
}
