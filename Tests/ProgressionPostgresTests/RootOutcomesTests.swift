#if PostgreSQL
import Foundation
import PostgresNIO
import Progression
import ProgressionTestSupport
import Testing
@testable import ProgressionPostgres
import ProgressionPostgresTestSupport

/// The console's chart reads outcomes from a history that several writers number as they write and show as they
/// commit: an outcome numbered below one already read, committed after that read, is counted once, and a number
/// that a rolled-back transaction took does not hold the reads back for good.
struct RootOutcomesTests {
    static let at = Date(timeIntervalSince1970: 1_700_000_000)

    static func completed(_ root: String) -> TaskEvent {
        TaskEvent(taskID: root, rootID: root, kind: .completed, at: at, attempt: 1)
    }

    static func configuration(_ name: String) throws -> PostgresTaskStore.Configuration {
        var configuration = try LocalPostgresServer.shared().configuration(
            schema: "outcomes_\(name)_\(UInt32.random(in: 0...UInt32.max))")
        // The held transaction lasts as long as the test needs on a loaded machine.
        configuration.callTimeout = .seconds(120)
        return configuration
    }

    /// Writes `event` in a transaction of `store` that commits once `release` opens; `written` opens once its number
    /// is taken. With `rollingBack`, it rolls back instead.
    static func hold(
        _ event: TaskEvent, in store: PostgresTaskStore, written: Gate, release: Gate, rollingBack: Bool = false
    ) -> Task<Void, any Error> {
        Task {
            try await store.write(notify: false) { connection -> Void in
                try await connection.query("SET LOCAL idle_in_transaction_session_timeout = 0", logger: store.logger)
                try await store.insertEvents([event], connection: connection)
                written.open()
                await release.wait()
                if rollingBack { throw CancellationError() }
            }
        }
    }

    @Test func anOutcomeCommittedAfterAHigherNumberedOneWasReadIsCountedOnce() async throws {
        try await PostgresTaskStore.withStore(configuration: Self.configuration("late")) { store in
            let written = Gate()
            let release = Gate()
            defer { release.open() }
            let late = Self.hold(Self.completed("late"), in: store, written: written, release: release)
            try await within(.seconds(120), "the late transaction's insert") { await written.wait() }
            try await store.insert([], events: [Self.completed("early")])

            let first = try await store.rootOutcomes(after: nil, since: .distantPast)
            #expect(first.outcomes.map(\.taskID) == ["early"])
            release.open()
            try await late.value
            let second = try await store.rootOutcomes(after: first.cursor, since: .distantPast)
            #expect(second.outcomes.map(\.taskID) == ["late"], "the lower number, committed after the first read")
            let third = try await store.rootOutcomes(after: second.cursor, since: .distantPast)
            #expect(third.outcomes.isEmpty, "nothing counted twice")
            #expect(third.cursor.seenThrough == 2 && third.cursor.missing.isEmpty)
        }
    }

    /// The transaction that commits its lower number late started after the one that commits first (its id is
    /// higher): the number is kept as missing while it runs, whatever the snapshot's own bounds say.
    @Test func aLowerNumberOfALaterTransactionIsWaitedForWhileItRuns() async throws {
        try await PostgresTaskStore.withStore(configuration: Self.configuration("younger")) { store in
            let firstHasItsID = Gate()
            let firstGoesOn = Gate()
            let laterWrote = Gate()
            let laterCommits = Gate()
            defer {
                firstGoesOn.open()
                laterCommits.open()
            }
            let first = Task {
                try await store.write(notify: false) { connection -> Void in
                    try await connection.query("SELECT pg_current_xact_id()", logger: store.logger)
                    firstHasItsID.open()
                    await firstGoesOn.wait()
                    try await store.insertEvents([Self.completed("early")], connection: connection)
                }
            }
            try await within(.seconds(120), "the first transaction's id") { await firstHasItsID.wait() }
            let later = Self.hold(Self.completed("late"), in: store, written: laterWrote, release: laterCommits)
            try await within(.seconds(120), "the later transaction's insert") { await laterWrote.wait() }
            firstGoesOn.open()
            try await first.value

            let one = try await store.rootOutcomes(after: nil, since: .distantPast)
            #expect(one.outcomes.map(\.taskID) == ["early"])
            let two = try await store.rootOutcomes(after: one.cursor, since: .distantPast)
            #expect(two.outcomes.isEmpty)
            #expect(two.cursor.through == 0, "number 1 is kept while its transaction runs")
            laterCommits.open()
            try await later.value
            let three = try await store.rootOutcomes(after: two.cursor, since: .distantPast)
            #expect(three.outcomes.map(\.taskID) == ["late"])
            #expect(three.cursor.seenThrough == 2 && three.cursor.missing.isEmpty)
        }
    }

    @Test func aNumberTakenByARolledBackTransactionIsPassedOnceItEnded() async throws {
        try await PostgresTaskStore.withStore(configuration: Self.configuration("rollback")) { store in
            let written = Gate()
            let release = Gate()
            defer { release.open() }
            let rolledBack = Self.hold(
                Self.completed("never"), in: store, written: written, release: release, rollingBack: true)
            try await within(.seconds(120), "the transaction's insert") { await written.wait() }
            try await store.insert([], events: [Self.completed("kept")])

            var page = try await store.rootOutcomes(after: nil, since: .distantPast)
            #expect(page.outcomes.map(\.taskID) == ["kept"])
            #expect(page.cursor.through == 0, "number 1 may still commit")
            release.open()
            await #expect(throws: (any Error).self) { try await rolledBack.value }
            var counted = page.outcomes.count
            // Once every transaction running at that read ended (other tests' on this server included).
            try await poll("the reads to pass the rolled-back number", timeout: .seconds(120)) {
                page = try await store.rootOutcomes(after: page.cursor, since: .distantPast)
                counted += page.outcomes.count
                return page.cursor.through == 2
            }
            #expect(counted == 1, "the outcome above the gap counted once")
            #expect(page.cursor.missing.isEmpty)
        }
    }
}
#endif
