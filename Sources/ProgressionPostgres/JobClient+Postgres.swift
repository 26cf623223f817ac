#if PostgreSQL
import Progression

extension JobClient {
    /// A client of a PostgreSQL database: producers on any host enqueue for workers on any host.
    public init(store: PostgresTaskStore, configuration: Configuration = .init()) {
        self.init(backend: store, configuration: configuration)
    }
}
#endif
