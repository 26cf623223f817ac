/// What a change of the graph leaves to do once the graph's lock is released: callers of `waitForTask` whose roots
/// became idle, and whether the timer loop must look at its deadlines again.
///
/// A change returns its effects (as postgres-nio's state machines return their actions) rather than leaving flags in
/// ``GraphState`` for the lock's wrapper to find: what a change does outside the lock is then in its signature, a test
/// of the state alone sees it, and the engine carries effects out in one place (``ExecutionEngine/perform(_:)``).
struct GraphEffects {
    /// Callers of `waitForTask` whose roots became idle, in the order they began to wait.
    var idleWaiters: [CheckedContinuation<Void, Never>] = []
    /// A deadline earlier than any the timer loop waited for was added: the loop must wake to wait for it.
    var wakesTimers = false
    /// A root claimed here waits to be loaded by the next claim pass: the claim loop must look.
    var wakesClaims = false

    var isEmpty: Bool { idleWaiters.isEmpty && !wakesTimers && !wakesClaims }

    static func += (left: inout GraphEffects, right: GraphEffects) {
        left.idleWaiters += right.idleWaiters
        left.wakesTimers = left.wakesTimers || right.wakesTimers
        left.wakesClaims = left.wakesClaims || right.wakesClaims
    }
}
