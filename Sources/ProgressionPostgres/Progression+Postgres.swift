#if PostgreSQL
import Progression

extension JobClient {
    /// A client of a PostgreSQL database: producers on any host enqueue for workers on any host.
    public init(store: PostgresTaskStore, configuration: Configuration = .init()) {
        self.init(backend: store, configuration: configuration)
    }
}

extension TaskExecutor {
    /// An executor on a PostgreSQL database: several hosts run the jobs of one database.
    public init(store: PostgresTaskStore, configuration: Configuration = .init()) {
        self.init(backend: store, configuration: configuration)
    }
}
#endif
