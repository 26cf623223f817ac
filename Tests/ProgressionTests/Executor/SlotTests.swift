import Foundation
import Progression
import ProgressionTestSupport
import Synchronization
import Testing

/// A root's slot across pause, resume, cancel and retry, one slot, each step waited for (the sequences the stress
/// test's random control reaches by chance).
struct SlotTests {
    /// A paused root gives its slot back; resumed while another holds it, its code waits for one; cancelled while it
    /// waits, then retried: the retry runs when the slot frees, to its end (it got stuck pending: the wait for the slot
    /// outlived the run that had it).
    @Test func aRootCancelledWhileItWaitsForASlotAndThenRetriedRunsToItsEnd() async throws {
        var configuration = TaskExecutor.Configuration()
        configuration.maxConcurrentTasks = 1
        configuration.completedTaskVisibility = .seconds(600)
        let executor = TaskExecutor(store: InMemoryTaskStore(), configuration: configuration)
        let firstRunWaits = Gate()
        let firstRunAtGate = Gate()
        let runs = Mutex(0)
        let a = try await executor.addTask(name: "a", options: TaskOptions.interactive.retryable()) { context in
            let run = runs.withLock {
                $0 += 1
                return $0
            }
            try await context.report(.progress(0.1))
            if run == 1 {
                firstRunAtGate.open()
                await firstRunWaits.wait()
            }
            try await context.report(.progress(0.5))
        }
        await firstRunAtGate.wait()
        try await executor.pause(taskID: a)
        // Its slot is free: b takes it and holds it.
        let releaseB = Gate()
        let b = try await executor.addTask(name: "b", options: .interactive) { context in
            try await context.report(.progress(0.1))
            await releaseB.wait()
        }
        try await executor.waitForStatus(b, .running)
        try await executor.resume(taskID: a)
        #expect(executor.snapshot(of: a)?.status == .pending, "no slot: it waits for one")
        firstRunWaits.open()
        try await executor.cancel(taskID: a)
        try await executor.runEnded(a)
        #expect(executor.snapshot(of: a)?.status == .cancelled)
        try await executor.retry(taskID: a)
        releaseB.open()
        try await executor.runEnded(b)
        try await executor.runEnded(a)
        let ended = try #require(executor.snapshot(of: a))
        #expect(ended.status == .completed && ended.progress == 1 && ended.attempt == 2)
        #expect(runs.withLock { $0 } == 2)
        await executor.shutdown()
    }

    /// Resumed, paused and resumed again while every slot is taken, a root is queued twice: it runs once, and the
    /// other queued entry does not take its slot from under it (two roots would run on one slot).
    @Test func aRootQueuedTwiceRunsOnceAndKeepsTheLimit() async throws {
        var configuration = TaskExecutor.Configuration()
        configuration.maxConcurrentTasks = 1
        configuration.completedTaskVisibility = .seconds(600)
        let executor = TaskExecutor(store: InMemoryTaskStore(), configuration: configuration)
        let running = Mutex((now: 0, most: 0))
        @Sendable func enter() { running.withLock { $0.now += 1; $0.most = max($0.most, $0.now) } }
        @Sendable func leave() { running.withLock { $0.now -= 1 } }
        let aAtGate = Gate()
        let aGoesOn = Gate()
        // Counted from where each root's code goes on holding a slot (a paused root's code waits at its report).
        let a = try await executor.addTask(name: "a", options: .interactive) { context in
            try await context.report(.progress(0.1))
            aAtGate.open()
            await aGoesOn.wait()
            try await context.report(.progress(0.5))
            enter()
            defer { leave() }
            try await context.report(.progress(0.9))
        }
        await aAtGate.wait()
        try await executor.pause(taskID: a)
        let releaseB = Gate()
        let b = try await executor.addTask(name: "b", options: .interactive) { context in
            try await context.report(.progress(0.1))
            enter()
            defer { leave() }
            await releaseB.wait()
        }
        try await executor.waitForStatus(b, .running)
        try await executor.resume(taskID: a)
        try await executor.pause(taskID: a)
        try await executor.resume(taskID: a)
        aGoesOn.open()
        // c waits behind a: one slot, so while a runs c must not.
        let c = try await executor.addTask(name: "c", options: .interactive) { context in
            enter()
            defer { leave() }
            try await context.report(.progress(1))
        }
        releaseB.open()
        for id in [a, b, c] { try await executor.runEnded(id) }
        for id in [a, b, c] { #expect(executor.snapshot(of: id)?.status == .completed, "\(id)") }
        #expect(running.withLock { $0.most } == 1, "one slot: never two roots' code at once")
        await executor.shutdown()
    }
}
