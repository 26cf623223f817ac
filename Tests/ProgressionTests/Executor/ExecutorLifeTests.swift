import Foundation
import Logging
import Progression
import ProgressionTestSupport
import ServiceLifecycle
import Testing

/// The executor's life as a service: its background loops run while `run()` serves and have ended when it returns,
/// whether the stop is a graceful shutdown, a `shutdown()` from elsewhere, or the service's cancellation (a forced
/// stop, which still leaves a running job resumable); an executor whose loops a task started before it served (the
/// seed's use) serves with those.
struct ExecutorLifeTests {
    static let loops = 10

    static func executor() -> TaskExecutor {
        var configuration = TaskExecutor.Configuration()
        configuration.logger = Logger(label: "life", factory: { _ in SwiftLogNoOpLogHandler() })
        return TaskExecutor(store: InMemoryTaskStore(), configuration: configuration)
    }

    static func register(_ executor: TaskExecutor) throws {
        try executor.register("double", input: Int.self) { input, _ in input * 2 }
        // Runs until it is stopped.
        try executor.register("endless", input: Int.self) { _, context in
            while true {
                try await context.report(.progress(0.5))
                try await Task.sleep(for: .milliseconds(5))
            }
        }
    }

    enum Stop: String, CaseIterable, Sendable {
        case gracefulShutdown, shutdownFromElsewhere, cancellation
    }

    @Test(arguments: Stop.allCases)
    func runServesUntilItsStopAndLeavesRunningJobsResumable(stop: Stop) async throws {
        let executor = Self.executor()
        try Self.register(executor)
        #expect(executor.runningLoops == 0)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: executor)], logger: Logger(label: "life", factory: { _ in SwiftLogNoOpLogHandler() })))
        let endless = try await within(.seconds(60), "the service to serve and stop (\(stop))") { () -> String in
            var endless = ""
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                try await waitUntil("the loops to run") { executor.runningLoops == Self.loops }
                let id = try await executor.submit("double", input: 21)
                await executor.waitForTask(id)
                #expect(executor.snapshot(of: id)?.status == .completed)
                endless = try await executor.submit("endless", input: 0)
                try await executor.waitForStatus(endless, .running)
                switch stop {
                case .gracefulShutdown: await group.triggerGracefulShutdown()
                case .shutdownFromElsewhere: await executor.shutdown()
                case .cancellation: tasks.cancelAll()
                }
                if stop == .shutdownFromElsewhere { await group.triggerGracefulShutdown() }
                try? await tasks.waitForAll()
            }
            return endless
        }
        #expect(executor.runningLoops == 0, "the loops ended before run() returned")
        // Stopped however it was, the job whose code ran was left to be resumed by any worker.
        let row = try await executor.store.task(id: endless)
        #expect(row?.status == .pending)
        #expect(row?.ownerID == nil)
        await #expect(throws: ProgressionError.self) { try await executor.submit("double", input: 1) }
    }

    /// A task added before the executor served started its loops in a task of their own: run() serves with those,
    /// and its graceful shutdown ends them.
    @Test func anExecutorStartedByAnAddedTaskServesWithItsOwnLoops() async throws {
        let executor = Self.executor()
        try Self.register(executor)
        let early = try await executor.submit("double", input: 1)
        try await waitUntil("the loops to run") { executor.runningLoops == Self.loops }
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
