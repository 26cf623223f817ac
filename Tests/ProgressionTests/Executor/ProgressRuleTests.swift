import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// The progress rule, as the README's worked examples state it: each example is a test.
struct ProgressRuleTests {
    /// Records a task's shown progress at moments the task code chooses.
    final class Trace: Sendable {
        let values = Recorder<Double?>()
        let executor: TaskExecutor
        let id: String

        init(_ executor: TaskExecutor, _ id: String) {
            self.executor = executor
            self.id = id
        }

        func note() { values.append(executor.snapshot(of: id)?.progress ?? nil) }

        var all: [Double?] { values.all }
    }

    static func isMonotone(_ values: [Double?]) -> Bool {
        let known = values.compactMap { $0 }
        return zip(known, known.dropFirst()).allSatisfy { $0 <= $1 }
    }

    static func close(_ values: [Double?], _ expected: [Double?]) -> Bool {
        guard values.count == expected.count else { return false }
        return zip(values, expected).allSatisfy { value, expected in
            switch (value, expected) {
            case (nil, nil): true
            case (let value?, let expected?): abs(value - expected) < 1e-9
            default: false
            }
        }
    }

    /// The README's own job: a step per file, `.step(i + 1, of: n)` reported after each push. Before its first report
    /// the task has said nothing about its size (indeterminate); from then on every file is a quarter; it reaches 1 only
    /// when its code returns.
    @Test func theReadmesJobPatternReadsProportionally() async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.memory, in: directory)
        let files = ["a.csv", "b.csv", "c.csv", "d.csv"]
        let trace = Trace(executor, "readme")
        let id = try await executor.addTask(name: "import", id: "readme") { context in
            for (index, file) in files.enumerated() {
                try await context.push(file) { step in
                    try await step.report(.progress(0.5))
                    trace.note()  // half of the file
                }
                trace.note()  // the file done, not reported yet
                try await context.report(.step(index + 1, of: files.count))
                trace.note()  // reported
            }
        }
        #expect(try await executor.finished(id).progress == 1)
        let expected: [Double?] = [
            nil, nil, 0.25,
            0.375, 0.5, 0.5,
            0.625, 0.75, 0.75,
            0.875, 0.999, 0.999,
        ]
        #expect(Self.close(trace.all, expected), "\(trace.all)")
        #expect(Self.isMonotone(trace.all))
        await executor.shutdown()
    }

    /// A declared total: each subtask is one unit of it, no step report needed.
    @Test func aDeclaredTotalCountsSubtasksAsUnits() async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.memory, in: directory)
        let trace = Trace(executor, "declared")
        let id = try await executor.addTask(name: "import", id: "declared") { context in
            try await context.report(.total(4))
            trace.note()
            for file in ["a", "b", "c", "d"] {
                try await context.push(file, weight: 1) { step in
                    try await step.report(.progress(0.5))
                    trace.note()
                }
                trace.note()
            }
        }
        #expect(try await executor.finished(id).progress == 1)
        #expect(Self.close(trace.all, [0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 0.999]), "\(trace.all)")
        await executor.shutdown()
    }

    /// Nested totals in bytes, as the demo declares them: a folder of 100 bytes and one of 200 in a job of 300; a file
    /// of 40 bytes half read in the first folder shows the folder at 0.2 and the job at 20 / 300.
    @Test func nestedDeclaredTotalsCarryUnitsUp() async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.memory, in: directory)
        let halfRead = Gate(), finish = Gate()
        let id = try await executor.addTask(name: "checksum", id: "bytes") { context in
            try await context.report(.total(300))
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await context.push("small/", weight: 100) { folder in
                        try await folder.report(.total(100))
                        try await folder.push("small/a", weight: 40) { file in
                            try await file.report(.completed(20, of: 40))
                            halfRead.open()
                            await finish.wait()
                        }
                        try await folder.push("small/b", weight: 60) { _ in }
                    }
                }
                group.addTask {
                    try await context.push("large/", weight: 200) { folder in
                        try await folder.report(.total(200))
                        await finish.wait()
                    }
                }
                try await group.waitForAll()
            }
        }
        await halfRead.wait()
        let live = try #require(executor.snapshot(of: id))
        #expect(abs((live.progress ?? -1) - 20.0 / 300) < 1e-9)
        #expect(live.total == 300)
        #expect(abs((live.completedUnits ?? -1) - 20) < 1e-9)
        let small = try #require(live.children.first { $0.name == "small/" })
        #expect(abs((small.progress ?? -1) - 0.2) < 1e-9)
        #expect(live.children.first { $0.name == "large/" }?.progress == 0)
        finish.open()
        #expect(try await executor.finished(id).progress == 1)
        await executor.shutdown()
    }

    /// Weighted subtasks pushed at once share the step under way: after `.step(1, of: 4)`, A (weight 1) at 60 % and
    /// B (weight 3) at 50 % show 0.25 + 0.25 × (1 × 0.6 + 3 × 0.5) / 4.
    @Test func concurrentWeightedSubtasksShareTheStepUnderWay() async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.memory, in: directory)
        let aReported = Gate(), bReported = Gate(), finish = Gate()
        let id = try await executor.addTask(name: "parent") { context in
            try await context.report(.step(1, of: 4))
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await context.push("A", weight: 1) { a in
                        try await a.report(.progress(0.6))
                        aReported.open()
                        await finish.wait()
                    }
                }
                group.addTask {
                    try await context.push("B", weight: 3) { b in
                        await aReported.wait()
                        try await b.report(.progress(0.5))
                        bReported.open()
                        await finish.wait()
                    }
                }
                try await group.waitForAll()
            }
        }
        await bReported.wait()
        let live = try #require(executor.snapshot(of: id))
        #expect(abs((live.progress ?? -1) - 0.38125) < 1e-9, "\(String(describing: live.progress))")
        // By name: the two pushes run in a task group, so either may be created first (a loaded CI run saw B first).
        let byName = Dictionary(uniqueKeysWithValues: live.children.map { ($0.name, $0.progress) })
        #expect(byName == ["A": 0.6, "B": 0.5], "\(byName)")
        finish.open()
        #expect(try await executor.finished(id).progress == 1)
        await executor.shutdown()
    }

    /// A task that did not complete keeps the progress it had; only a completed one shows 1, and one whose code
    /// reported 1 but has not returned shows 0.999.
    @Test(arguments: ["cancel", "fail"])
    func anUnfinishedTaskKeepsTheProgressItHad(ending: String) async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.sqlite, in: directory)
        struct Broken: Error {}
        let reported = Gate()
        let id = try await executor.addTask(name: "long") { context in
            try await context.report(.total(100))
            try await context.push("part", weight: 2) { part in
                try await part.report(.progress(1))
                reported.open()
                if ending == "fail" { throw Broken() }
                try await Task.sleep(for: .seconds(600))
            }
        }
        await reported.wait()
        #expect(executor.snapshot(of: id)?.children.first?.progress == 0.999)
        if ending == "cancel" { try await executor.cancel(taskID: id) }
        let ended = try await executor.finished(id)
        #expect(ended.status == (ending == "cancel" ? .cancelled : .failed))
        // The part had done all of its 2 units (it reported 1, shown as 0.999) when it ended: 2 of 100.
        #expect(abs((ended.progress ?? -1) - 0.02) < 1e-9, "\(String(describing: ended.progress))")
        try await executor.flush()
        #expect(try await executor.store.task(id: id)?.progress == ended.progress)
        await executor.shutdown()
    }

    /// A retried job: its completed steps are found again and counted at once, and the value shown never drops
    /// below what the failed attempt reached.
    @Test func aRetriedJobResumesItsProgressWithoutGoingBack() async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.memory, in: directory)
        let runs = Counter()
        let trace = Trace(executor, "steps")
        struct Boom: Error {}
        let id = try await executor.addTask(name: "steps", id: "steps", options: TaskOptions.default.retryable()) {
            context in
            runs.increment()
            try await context.report(.total(4))
            for index in 1...4 {
                try await context.push("step \(index)") { _ in
                    trace.note()
                    if index == 3, runs.count == 1 { throw Boom() }
                }
            }
        }
        #expect(try await executor.finished(id).status == .failed)
        #expect(executor.snapshot(of: id)?.progress == 0.5)
        try await executor.retry(taskID: id)
        try await executor.runEnded(id)
        #expect(executor.snapshot(of: id)?.status == .completed && executor.snapshot(of: id)?.progress == 1)
        // Attempt 1: steps 1–3 start at 0, 0.25, 0.5; attempt 2 skips 1 and 2 and starts 3 and 4 at 0.5 and 0.75.
        #expect(Self.close(trace.all, [0, 0.25, 0.5, 0.5, 0.75]), "\(trace.all)")
        await executor.shutdown()
    }

    /// A job stopped gracefully and resumed by another executor shows what it had reached, then goes on.
    @Test func aResumedJobStartsFromWhereItWas() async throws {
        let directory = try TemporaryDirectory()
        let store = try await StoreKind.sqlite.make(in: directory)
        struct Input: Codable, Sendable {}
        let seen = Recorder<Double?>()
        let halfway = Gate()
        func register(_ executor: TaskExecutor, stopAtHalf: Bool) throws {
            try executor.register("count", input: Input.self) { _, context in
                try await context.report(.total(4))
                for index in 1...4 {
                    try await context.push("item \(index)", weight: 1) { _ in
                        seen.append(executor.snapshot(of: context.taskID)?.progress ?? nil)
                        if stopAtHalf, index == 3 {
                            halfway.open()
                            try await Task.sleep(for: .seconds(600))
                        }
                    }
                }
            }
        }
        var configuration = TaskExecutor.Configuration()
        configuration.completedTaskVisibility = .seconds(600)
        let first = try TaskExecutor(store: store, configuration: configuration)
        try register(first, stopAtHalf: true)
        let id = try await first.submit("count", input: Input())
        await halfway.wait()
        await first.shutdown()
        #expect(try await store.task(id: id)?.status == .pending)
        #expect(try await store.task(id: id)?.progress == 0.5)

        let second = try TaskExecutor(store: store, configuration: configuration)
        try register(second, stopAtHalf: false)
        try await second.start()
        try await second.runEnded(id)
        #expect(second.snapshot(of: id)?.progress == 1)
        #expect(Self.close(seen.all, [0, 0.25, 0.5, 0.5, 0.75]), "\(seen.all)")
        await second.shutdown()
    }

    /// `updatedAt` moves with the progress that is written, for a root too.
    @Test func updatedAtMovesWithProgress() async throws {
        let directory = try TemporaryDirectory()
        let clock = ManualClock()
        let executor = try await makeExecutor(.sqlite, in: directory, clock: clock)
        let step = Gate(), stepped = Gate(), finish = Gate()
        let id = try await executor.addTask(name: "root") { context in
            try await context.report(.total(2))
            try await context.push("a", weight: 1) { child in
                await step.wait()
                try await child.report(.progress(0.5))
                stepped.open()
                await finish.wait()
            }
        }
        try await waitUntil("the root to run") { executor.snapshot(of: id)?.status == .running }
        let before = try #require(executor.snapshot(of: id)?.updatedAt)
        clock.advance(by: .seconds(3))
        step.open()
        await stepped.wait()
        try await executor.flush()
        let after = try #require(try await executor.store.task(id: id))
        #expect(after.progress == 0.25)
        #expect(after.updatedAt.timeIntervalSince(before) >= 3)
        finish.open()
        try await executor.runEnded(id)
        await executor.shutdown()
    }

    /// A transition is one event at the node it happened to: pausing a root with 500 running descendants writes one
    /// `paused` event (the descendants' pause is implied), and resuming one `resumed` event.
    @Test func pausingARootWithManyDescendantsWritesOneEvent() async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.sqlite, in: directory)
        let running = Counter(), release = Gate()
        let id = try await executor.addTask(name: "wide", options: .interactive) { context in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<500 {
                    group.addTask {
                        try await context.push("part \(index)") { part in
                            running.increment()
                            await release.wait()
                            try await part.report(.progress(0.5))
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        try await waitUntil("500 parts running") { running.count == 500 }
        try await executor.pause(taskID: id)
        let paused = try #require(executor.snapshot(of: id))
        #expect(paused.status == .paused && paused.children.allSatisfy { $0.status == .paused })
        release.open()
        try await executor.resume(taskID: id)
        _ = try await executor.finished(id)
        try await executor.flush()
        let kinds = try await executor.store.events(of: id, limit: 10_000).map(\.kind)
        #expect(kinds.filter { $0 == .paused }.count == 1)
        #expect(kinds.filter { $0 == .resumed }.count == 1)
        await executor.shutdown()
    }

    /// A running task carries a smoothed rate (fraction per second) and the time left it implies; its row stores the
    /// rate; a pause clears it (the time paused does not count).
    @Test func aRunningTaskCarriesARateAndATimeLeft() async throws {
        let directory = try TemporaryDirectory()
        let clock = ManualClock()
        let executor = try await makeExecutor(.sqlite, in: directory, clock: clock)
        let go = (0...5).map { _ in Gate() }, reached = (0...5).map { _ in Gate() }
        let id = try await executor.addTask(name: "steady", options: .interactive) { context in
            try await context.report(.total(100))
            for step in 1...5 {
                await go[step].wait()
                try await context.report(.completed(Double(step) * 10))
                reached[step].open()
            }
            await go[0].wait()
        }
        try await waitUntil("the task to run") { executor.snapshot(of: id)?.progress == 0 }
        for step in 1...5 {
            clock.advance(by: .seconds(1))
            go[step].open()
            await reached[step].wait()
        }
        let running = try #require(executor.snapshot(of: id))
        #expect(running.progress == 0.5)
        #expect(abs((running.rate ?? 0) - 0.1) < 1e-9, "\(String(describing: running.rate))")
        #expect(running.estimatedTimeRemaining == .seconds(5))
        try await executor.flush()
        #expect(abs((try await executor.store.task(id: id)?.rate ?? 0) - 0.1) < 1e-9)
        try await executor.pause(taskID: id)
        #expect(executor.snapshot(of: id)?.rate == nil && executor.snapshot(of: id)?.estimatedTimeRemaining == nil)
        try await executor.resume(taskID: id)
        go[0].open()
        #expect(try await executor.finished(id).rate == nil)
        await executor.shutdown()
    }
}
