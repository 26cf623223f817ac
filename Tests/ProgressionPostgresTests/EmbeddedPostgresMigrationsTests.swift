#if PostgreSQL
import Foundation
import Testing
@testable import ProgressionPostgres

/// The PostgreSQL migrations embedded in the binary are the files of migrations/postgres/.
struct EmbeddedPostgresMigrationsTests {
    @Test func embeddedMigrationsEqualTheFolder() throws {
        let folder = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("migrations/postgres")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { $0.hasSuffix(".sql") }.sorted()
        #expect(!files.isEmpty)
        #expect(PostgresMigration.embedded.map(\.identifier) == files.map { String($0.dropLast(4)) })
        for (migration, file) in zip(PostgresMigration.embedded, files) {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            #expect(migration.sql + "\n" == text, "\(file) differs from the embedded copy: run tools/generate-migrations.sh")
        }
    }

    @Test func aMigrationSplitsIntoItsStatementsWithoutComments() {
        let statements = PostgresMigrator.statements(of: "-- a comment; with a semicolon\nCREATE TABLE a (x int); -- end\n\nSELECT 1;\n")
        #expect(statements == ["CREATE TABLE a (x int)", "SELECT 1"])
    }

    /// A procedure's body is one statement whatever it holds: `;` inside a dollar quote does not split it, nor does a
    /// parameter (`$1`) or another tag (`$$` inside `$body$`) end the quote.
    @Test func aDollarQuotedBodyStaysOneStatement() {
        let sql = """
            CREATE PROCEDURE p(a int) LANGUAGE plpgsql AS $body$
            BEGIN
                PERFORM $1; -- a comment
                RAISE NOTICE '$$;';
                COMMIT;
            END
            $body$;
            CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1; $$;
            SELECT 2;
            """
        let statements = PostgresMigrator.statements(of: sql)
        #expect(statements.count == 3)
        #expect(statements.first?.hasPrefix("CREATE PROCEDURE p") == true)
        #expect(statements.first?.hasSuffix("END\n$body$") == true)
        #expect(statements.dropFirst().first == "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1; $$")
        #expect(statements.last == "SELECT 2")
    }
}
#endif
