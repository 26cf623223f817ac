/// What an executor's store can do beyond running jobs on one host (``TaskStoreCore``), asked once when the executor
/// is made: each is `nil` when the store cannot, and the executor does without it as ``TaskStoreCore`` says.
struct StoreCapabilities: Sendable {
    let controlQueue: (any ControlRequestQueue)?
    let housekeeping: (any StoreHousekeeping)?
    let fleet: (any FleetStore)?
    let jobTrees: (any JobTreeStore)?
    /// Every capability at once (the gauges read from all of them).
    let backend: (any TaskStoreBackend)?
    /// The wakes of the stores of one database within the process.
    let beacons: StoreBeacons?
    /// The store's type, for the sentence that refuses what it cannot do.
    let storeType: String

    init(_ store: any TaskStoreCore) {
        controlQueue = store as? any ControlRequestQueue
        housekeeping = store as? any StoreHousekeeping
        fleet = store as? any FleetStore
        jobTrees = store as? any JobTreeStore
        backend = store as? any TaskStoreBackend
        beacons = (store as? any BroadcastingChanges)?.beacons
        storeType = String(describing: type(of: store))
    }

    /// `capability`, or the refusal of `what` (a verb phrase: "pause a kind") when the store lacks it.
    ///
    /// - Throws: ``ProgressionError/storeCannot(store:action:)``.
    func require<Capability>(_ capability: Capability?, to what: String) throws(ProgressionError) -> Capability {
        guard let capability else { throw .storeCannot(store: storeType, action: what) }
        return capability
    }

    var jobTreesOrRefusal: any JobTreeStore {
        get throws(ProgressionError) { try require(jobTrees, to: "keep child jobs, dependencies or signals") }
    }

    var fleetOrRefusal: any FleetStore {
        get throws(ProgressionError) { try require(fleet, to: "pause kinds or keep schedules") }
    }
}

/// ``TaskExecutor/store`` of an executor whose store has only the core (``TaskStoreCore``): reads a task, a tree and
/// a job by its key through it, and refuses listings, counts and history, which the core does not have.
struct CoreStoreReader: TaskStore {
    let core: any TaskStoreCore

    func task(id: String) async throws -> TaskRecord? { try await core.task(id: id) }
    func tree(of id: String) async throws -> [TaskRecord] { try await core.tree(of: id) }
    func root(kind: String, idempotencyKey: String) async throws -> TaskRecord? {
        try await core.root(kind: kind, idempotencyKey: idempotencyKey)
    }

    func roots(_ query: TaskQuery) async throws -> [TaskRecord] { throw refusal("list tasks") }
    func countRoots(_ query: TaskQuery, upTo bound: Int?) async throws -> Int { throw refusal("count tasks") }
    func events(_ query: EventQuery) async throws -> [TaskEvent] { throw refusal("read a task's history") }
    func taskIDs(withPrefix prefix: String, rootsOnly: Bool, limit: Int) async throws -> [String] {
        throw refusal("find tasks by a prefix of their id")
    }
    func statistics() async throws -> TaskStoreStatistics { throw refusal("count tasks") }
    func failedSteps(ofRoots ids: [String]) async throws -> [String: Int] { throw refusal("count failed steps") }

    private func refusal(_ what: String) -> ProgressionError {
        .storeCannot(store: String(describing: type(of: core)), action: what)
    }
}
