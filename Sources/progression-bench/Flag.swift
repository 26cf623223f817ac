import Synchronization

/// A boolean that one task sets and another reads, shareable by reference (an `Atomic` cannot be captured).
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)

    func set() { value.store(true, ordering: .releasing) }

    var isSet: Bool { value.load(ordering: .acquiring) }
}
