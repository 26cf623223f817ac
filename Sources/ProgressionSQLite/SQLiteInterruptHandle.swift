import CSQLite
import Synchronization

/// Interrupts a connection from any thread: `sqlite3_interrupt` is safe to call from another thread while the
/// connection is open, and the mutex keeps it from being called once the connection is closed.
package final class SQLiteInterruptHandle: Sendable {
    /// The connection handle's address, `nil` once the connection is closed. It is kept as an integer because
    /// `OpaquePointer` is not `Sendable`; it is turned back into a pointer only under the lock, and only to call
    /// `sqlite3_interrupt`, while `invalidate()` (called before `sqlite3_close_v2`) has not run.
    private let address: Mutex<UInt?>

    init(handle: OpaquePointer) {
        address = Mutex(UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(handle))))
    }

    /// Makes the running statement (if any) fail with `SQLITE_INTERRUPT` as soon as possible.
    package func interrupt() {
        address.withLock { address in
            if let address, let handle = OpaquePointer(bitPattern: address) { sqlite3_interrupt(handle) }
        }
    }

    /// Marks the connection closed; returns whether it was open.
    func invalidate() -> Bool {
        address.withLock { address in
            defer { address = nil }
            return address != nil
        }
    }
}
