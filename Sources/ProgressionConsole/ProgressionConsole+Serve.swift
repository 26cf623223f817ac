#if Console
import Foundation
import Hummingbird
import Logging
import NIOCore

extension ProgressionConsole {
    /// Serves the console alone (`progressctl console`): a Hummingbird application on `host` and `port` (0: any free
    /// port) with the console's routes and service, until SIGTERM or SIGINT. `listening` is called with the URL once
    /// the server accepts connections.
    ///
    /// - Throws: ``ConfigurationError`` when it cannot listen there (the port is in use, the address is not this
    ///   machine's).
    package func serve(
        host: String, port: Int, listening: @escaping @Sendable (String) async -> Void
    ) async throws {
        let router = Router()
        addRoutes(to: router)
        let app = Application(
            router: router,
            configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: "progression-console"),
            services: [self],
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? port
                let shownHost = host.contains(":") ? "[\(host)]" : host
                await listening("http://\(shownHost):\(bound)\(self.base)/")
            },
            logger: logger)
        do {
            try await app.runService()
        } catch let error as IOError {
            throw ConfigurationError(
                description: "cannot listen on \(host):\(port): \(String(cString: strerror(error.errnoCode)))")
        }
    }
}
#endif
