import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

/// Options every command takes: which database, how long to wait for its lock, JSON output and colour.
struct GlobalOptions: ParsableArguments {
    /// The database file.
    @Option(name: .long, help: ArgumentHelp("The database file, or a postgres://user@host:port/db?schema=name URL (default: $PROGRESSION_DB, else the library's default).", valueName: "path|url"))
    var db: String?

    /// Print one JSON document instead of text.
    @Flag(name: .long, help: "Print one JSON document on stdout instead of text.")
    var json = false

    /// When to colour the output.
    @Option(name: .long, help: ArgumentHelp("Colour the output: auto (on a terminal, unless NO_COLOR is set), always or never.", valueName: "when"))
    var color: Terminal.ColorMode = .auto

    /// How long to wait for another process's write lock.
    @Option(name: .customLong("busy-timeout"), parsing: .unconditional, help: ArgumentHelp("Milliseconds to wait for another process's lock.", valueName: "ms"))
    var busyTimeout: Int = 5000

    /// The path in force: `--db`, else `$PROGRESSION_DB`, else the library's default.
    var databasePath: String {
        if let db, !db.isEmpty { return db }
        return SQLiteTaskStore.defaultPath
    }

    /// Opens the existing database; never creates it. `readOnly` for commands that only read.
    func openStore(readOnly: Bool) throws -> OperatorStore {
        let path = databasePath
        if DatabaseURL.isPostgres(path) { return try DatabaseURL.openPostgres(path, readOnly: readOnly) }
        var isDirectory: ObjCBool = false
        // A dangling symbolic link goes on to the store, which says so.
        let isLink = (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) != nil
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) || isLink else {
            throw CLIError("no database at '\(path)' (give --db PATH or set PROGRESSION_DB)")
        }
        guard !isDirectory.boolValue else { throw CLIError("'\(path)' is a directory, not a database") }
        guard busyTimeout >= 0 else { throw CLIError.usage("--busy-timeout must be 0 or more milliseconds") }
        var configuration = SQLiteTaskStore.Configuration()
        configuration.createIfMissing = false
        configuration.readOnly = readOnly
        configuration.busyTimeout = .milliseconds(busyTimeout)
        do {
            return OperatorStore(sqlite: try SQLiteTaskStore(path: path, configuration: configuration))
        } catch let error as TaskStoreError {
            throw CLIError(store: error)
        }
    }
}
