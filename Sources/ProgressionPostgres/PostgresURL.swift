#if PostgreSQL
import Foundation
import Progression

/// Reads `postgres://` URLs into a ``PostgresTaskStore/Configuration``.
package enum PostgresURL {
    /// Whether `text` is a PostgreSQL URL (`postgres://` or `postgresql://`), as opposed to a SQLite file's path.
    package static func isPostgres(_ text: String) -> Bool {
        let lowered = text.lowercased()
        return lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://")
    }

    /// The configuration a URL names; see ``PostgresTaskStore/Configuration/init(url:)``.
    ///
    /// - Throws: ``TaskStoreError`` (`.cannotOpen`) naming what is wrong.
    package static func parse(_ text: String) throws -> PostgresTaskStore.Configuration {
        func invalid(_ why: String) -> TaskStoreError {
            TaskStoreError(.cannotOpen, message: "invalid PostgreSQL URL: \(why) (expected postgres://user@host:port/database?schema=name)")
        }
        guard isPostgres(text), let components = URLComponents(string: text) else {
            throw invalid("it does not parse")
        }
        var query: [String: String] = [:]
        for item in components.queryItems ?? [] {
            guard let value = item.value else { throw invalid("'\(item.name)' has no value") }
            query[item.name] = value
        }
        let known: Set<String> = ["schema", "sslmode", "host", "port", "user", "password", "dbname", "connect_timeout"]
        if let unknown = query.keys.sorted().first(where: { !known.contains($0) }) {
            throw invalid("unknown parameter '\(unknown)'")
        }
        let environmentUser = ProcessInfo.processInfo.environment["USER"].flatMap { $0.isEmpty ? nil : $0 }
        guard let username = query["user"] ?? components.user ?? environmentUser else {
            throw invalid("no user name")
        }
        let password = query["password"] ?? components.password
        var database = query["dbname"] ?? String(components.path.drop { $0 == "/" })
        if database.isEmpty { database = username }
        guard !database.contains("/") else { throw invalid("the database name '\(database)' has a '/'") }
        var port = components.port ?? 5432
        if let text = query["port"] {
            guard let value = Int(text) else { throw invalid("port '\(text)' is not a number") }
            port = value
        }
        guard (1...65535).contains(port) else { throw invalid("port \(port) is out of range") }
        let host = query["host"] ?? components.host.flatMap { $0.removingPercentEncoding ?? $0 }
        var configuration: PostgresTaskStore.Configuration
        if let host, host.hasPrefix("/") {
            // A Unix socket: the directory, as libpq names it.
            let socket = (host.hasSuffix("/") ? String(host.dropLast()) : host) + "/.s.PGSQL.\(port)"
            configuration = .init(unixSocketPath: socket, username: username, password: password, database: database)
        } else {
            configuration = .init(
                host: host.flatMap { $0.isEmpty ? nil : $0 } ?? "localhost", port: port, username: username,
                password: password, database: database)
        }
        if let schema = query["schema"] {
            _ = try PostgresNames(schema: schema)
            configuration.schema = schema
        }
        if let mode = query["sslmode"] {
            switch mode {
            case "disable", "allow": configuration.tls = .disable
            case "prefer": configuration.tls = .prefer
            case "require", "verify-ca", "verify-full": configuration.tls = .require
            default: throw invalid("sslmode '\(mode)' is not one of disable, prefer, require")
            }
        }
        if let text = query["connect_timeout"] {
            guard let seconds = Int(text), seconds > 0 else { throw invalid("connect_timeout '\(text)' is not a number of seconds") }
            configuration.connectTimeout = .seconds(seconds)
        }
        return configuration
    }
}
#endif
