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
}
#endif
