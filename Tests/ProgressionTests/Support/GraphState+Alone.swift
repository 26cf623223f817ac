import Foundation

@testable import Progression

extension GraphState {
    /// A graph of owner `owner` with `slots` slots, alone (no engine, no writer): for the table tests of its decisions.
    static func alone(slots: Int) -> GraphState {
        let (_, wake) = AsyncStream<Void>.makeStream()
        return GraphState(
            ownerID: "owner", maxConcurrentTasks: slots, writerWake: wake, eventBacklogLimit: 1_000, writerLagTolerance: 1)
    }
}
