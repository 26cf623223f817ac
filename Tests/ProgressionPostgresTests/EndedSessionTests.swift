#if PostgreSQL
import PostgresNIO
import Progression
import ProgressionTestSupport
import Testing
@testable import ProgressionPostgres

/// A connection of the store's pool whose session the server ends in the middle of a statement (`pg_terminate_backend`,
/// as a lost call's settle does, or an operator) is closed before it goes back to the pool
/// (`PostgresClient.withPooledConnection`): postgres-nio 1.33.2 would hand it to the next call, which then waited for
/// an answer that never came until its deadline.
struct EndedSessionTests {
    /// Each round ends the session of a statement that waits, then makes the next call on the pool (one connection
    /// besides the listener's), which must be answered. The calls' deadline (60 s) only bounds a failure.
    @Test func aCallAfterTheServerEndedTheSessionOfTheLastIsAnswered() async throws {
        let schema = PostgresSchemaTests.schemaName("endedsession")
        let store = try await PostgresSchemaTests.open(schema) {
            $0.maximumConnections = 2
            $0.callTimeout = .seconds(60)
        }
        let observer = try await PostgresSchemaTests.open(PostgresSchemaTests.schemaName("endedobserver"))
        defer {
            Task {
                await store.close()
                await observer.close()
            }
        }
        for round in 0..<5 {
            let marker = "\(schema)_\(round)"
            let waiting = Task {
                try await store.read { connection in
                    try await connection.query(
                        PostgresQuery(unsafeSQL: "SELECT pg_sleep(60) AS \(marker)"), logger: store.logger
                    ).collect()
                }
            }
            var pid: Int32?
            try await poll("the statement of round \(round) to run", timeout: .seconds(60)) {
                pid = try await observer.read { connection in
                    try await observer.rows(
                        "SELECT pid FROM pg_stat_activity WHERE query LIKE '%AS ' || $1 AND pid <> pg_backend_pid()",
                        bindings(marker), connection: connection
                    ) { try $0.decode(Int32.self) }.first
                }
                return pid != nil
            }
            let backend = try #require(pid)
            #expect(try await LostInsertTests.terminate(backend, observer: observer))
            let error = await #expect(throws: TaskStoreError.self) { _ = try await waiting.value }
            #expect(error?.reason == .unavailable)
            let answer = try await store.read { connection in
                try await store.rows("SELECT 1::int8", connection: connection) { try $0.decode(Int64.self) }.first
            }
            #expect(answer == 1)
        }
    }
}
#endif
