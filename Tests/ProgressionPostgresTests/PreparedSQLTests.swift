#if PostgreSQL
import Foundation
import PostgresNIO
import Testing
@testable import ProgressionPostgres

/// The store's hot statements, kept prepared on each connection under a name for each text (``PreparedSQL``).
struct PreparedSQLTests {
    /// Two texts on one connection, each sent twice in turn: each answers its own query, and the server holds both,
    /// each under its own name. Were postgres-nio to read a statement's name outside the call's binding, the second
    /// text would run the first one's statement (or trap), and this would fail.
    @Test func preparedStatementsAreKeptByTheirTextOnEachConnection() async throws {
        let store = try await PostgresSchemaTests.open(PostgresSchemaTests.schemaName("prepared"))
        defer { Task { await store.close() } }
        let plus = "SELECT $1::int8 + 1 AS answer"
        let times = "SELECT $1::int8 * 10 AS answer"
        let (answers, held) = try await store.client.withConnection { connection in
            var answers: [Int64] = []
            for (sql, value) in [(plus, Int64(4)), (times, 4), (plus, 7), (times, 7)] {
                let rows = try await PreparedSQL.run(sql, bindings(value), connection: connection, logger: store.logger)
                answers += try rows.map { try $0.decode(Int64.self) }
            }
            let held = try await PreparedSQL.run(
                "SELECT name, statement FROM pg_prepared_statements WHERE statement = ANY($1::text[])",
                bindings([plus, times]), connection: connection, logger: store.logger
            ).map { try $0.decode((String, String).self) }
            return (answers, held)
        }
        #expect(answers == [5, 40, 8, 70])
        let names = Dictionary(uniqueKeysWithValues: held.map { ($0.1, $0.0) })
        #expect(names[plus] == PreparedSQL.names.name(for: plus))
        #expect(names[times] == PreparedSQL.names.name(for: times))
        #expect(names[plus] != names[times])
    }

    /// postgres-nio keeps a statement whose preparation failed as failed on its connection: a text that named a table
    /// not there yet is prepared again under a new name, and runs once the table exists.
    @Test func aStatementTheServerCouldNotPrepareRunsOnceItCan() async throws {
        let store = try await PostgresSchemaTests.open(PostgresSchemaTests.schemaName("prepared"))
        defer { Task { await store.close() } }
        let table = "\(store.names.quoted).later_\(UInt32.random(in: 0...UInt32.max))"
        let sql = "SELECT count(*) FROM \(table) WHERE $1::int8 > 0"
        let count = try await store.client.withConnection { connection in
            let before = PreparedSQL.names.name(for: sql)
            await #expect(throws: PSQLError.self) {
                try await PreparedSQL.run(sql, bindings(Int64(1)), connection: connection, logger: store.logger)
            }
            #expect(PreparedSQL.names.name(for: sql) != before)
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE TABLE \(table) (id int)"), logger: store.logger)
            return try await PreparedSQL.run(sql, bindings(Int64(1)), connection: connection, logger: store.logger)
                .map { try $0.decode(Int64.self) }.first
        }
        #expect(count == 0)
    }

    /// An error of the execution (here a division by zero) keeps the statement's name: it stays prepared.
    @Test func anErrorOfTheExecutionKeepsTheName() async throws {
        let store = try await PostgresSchemaTests.open(PostgresSchemaTests.schemaName("prepared"))
        defer { Task { await store.close() } }
        let sql = "SELECT 10 / $1::int8"
        let answer = try await store.client.withConnection { connection in
            let before = PreparedSQL.names.name(for: sql)
            await #expect(throws: PSQLError.self) {
                try await PreparedSQL.run(sql, bindings(Int64(0)), connection: connection, logger: store.logger)
            }
            #expect(PreparedSQL.names.name(for: sql) == before)
            return try await PreparedSQL.run(sql, bindings(Int64(5)), connection: connection, logger: store.logger)
                .map { try $0.decode(Int64.self) }.first
        }
        #expect(answer == 2)
    }
}
#endif
