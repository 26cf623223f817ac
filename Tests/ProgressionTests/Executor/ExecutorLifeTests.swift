import Foundation
import Logging
import Progression
import ProgressionTestSupport
import ServiceLifecycle
import Testing

/// The executor's life as a service: its background loops run in `run()`'s task group and end with it, whether the
/// stop is a graceful shutdown, a `shutdown()` from elsewhere, or the service's cancellation; an executor whose loops
/// a task started before it served (the seed's use) serves with those.
struct ExecutorLifeTests {
    static let loops = 10

    static func executor() -> TaskExecutor {
        var configuration = TaskExecutor.Configuration()
        configuration.logger = Logger(label: "life", factory: { _ in SwiftLogNoOpLogHandler() })
        return TaskExecutor(store: InMemoryTaskStore(), configuration: configuration)
    }

    static func register(_ executor: TaskExecutor) throws {
        try executor.register("double", input: Int.self) { input, _ in input * 2 }
    }

    enum Stop: String, CaseIterable, Sendable {
        case gracefulShutdown, shutdownFromElsewhere, cancellation
    }

    @Test(arguments: Stop.allCases)
    func runOwnsTheLoopsAndEndsThemWithIt(stop: Stop) async throws {
        let executor = Self.executor()
        try Self.register(executor)
        #expect(executor.runningLoops == 0)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: executor)], logger: Logger(label: "life", factory: { _ in SwiftLogNoOpLogHandler() })))
        try await within(.seconds(60), "the service to serve and stop (\(stop))") {
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                try await waitUntil("the loops to run") { executor.runningLoops == Self.loops }
                let id = try await executor.submit("double", input: 21)
                await executor.waitForTask(id)
                #expect(executor.snapshot(of: id)?.status == .completed)
                switch stop {
                case .gracefulShutdown: await group.triggerGracefulShutdown()
                case .shutdownFromElsewhere: await executor.shutdown()
                case .cancellation: tasks.cancelAll()
                }
                if stop == .shutdownFromElsewhere { await group.triggerGracefulShutdown() }
                try? await tasks.waitForAll()
            }
        }
        #expect(executor.runningLoops == 0, "the loops ended with run()")
        await #expect(throws: ProgressionError.self) { try await executor.submit("double", input: 1) }
    }

    /// A task added before the executor served started its loops in a task of their own: run() serves with those,
    /// and its graceful shutdown ends them.
    @Test func anExecutorStartedByAnAddedTaskServesWithItsOwnLoops() async throws {
        let executor = Self.executor()
        try Self.register(executor)
        let early = try await executor.submit("double", input: 1)
        #expect(executor.runningLoops == Self.loops)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: executor)], logger: Logger(label: "life", factory: { _ in SwiftLogNoOpLogHandler() })))
        try await within(.seconds(60), "the service to serve and stop") {
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                await executor.waitForTask(early)
                #expect(executor.snapshot(of: early)?.status == .completed)
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
        }
        #expect(executor.runningLoops == 0)
    }
}
