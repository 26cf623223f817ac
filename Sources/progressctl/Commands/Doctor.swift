import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// Checks the database: integrity, schema, owners and the tasks that dead owners hold.
    struct Doctor: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check the database: integrity, schema version, executors (owners) and tasks held by dead ones.",
            discussion: """
                Exits with status 1 when the integrity check finds a problem.

                Examples:
                  progressctl doctor
                  progressctl doctor --json
                """)

        @OptionGroup var options: GlobalOptions

        /// `doctor --json`.
        struct DoctorJSON: Encodable {
            struct Owner: Encodable {
                var id: String
                var host: String
                var pid: Int32
                var startedAt: Date
                var heartbeatAt: Date
                @Null var stoppedAt: Date?
                var liveness: String
                var alive: Bool
                var unfinishedTasks: Int
                /// The job kinds it registered (`null`: an owner of an older version, which records none).
                @Null var kinds: [String]?
            }
            /// Pending jobs of a kind that no live worker registered: nothing runs them until one starts.
            struct Unrunnable: Encodable {
                var kind: String
                var pending: Int
            }
            /// Unfinished jobs that a version of their kind began which no live worker that registered the kind can
            /// continue (``JobVersion``): they wait for a worker of a version that can.
            struct WaitingVersion: Encodable {
                var kind: String
                var version: String
                var jobs: Int
                /// The versions the live workers of the kind run ("2 (continues 1)"; "none" for a worker that
                /// registered the kind without a version, which continues any job).
                var workerVersions: [String]
            }
            /// A schedule whose kind no live worker registered: its ticks make no job until one starts.
            struct Unscheduled: Encodable {
                var name: String
                var kind: String
            }
            var path: String
            var integrity: [String]
            var integrityOK: Bool
            var schemaMigrations: [String]
            var owners: [Owner]
            /// Unfinished roots whose owner is not alive (dead, stopped or unknown): the next executor recovers them.
            var tasksHeldByDeadOwners: Int
            /// Pending jobs that no live worker can run, by kind (empty when some live owner records no kinds).
            var pendingWithoutWorker: [Unrunnable]
            /// Schedules that no live worker can fire.
            var schedulesWithoutWorker: [Unscheduled]
            /// Jobs waiting for a worker of a version that can continue them, by kind and version.
            var versionsWithoutWorker: [WaitingVersion]
        }

        func run() async throws {
            let store = try options.openStore(readOnly: true)
            let integrity = try await store.checked { try await $0.integrityCheck() }
            let schema = try await store.checked { try await $0.schemaVersion() }
            let owners = try await store.checked { try await $0.owners() }
            // A full scan of the unfinished roots, counted per owner.
            var heldBy: [String: Int] = [:]
            // Versioned jobs by kind, version and owner (`""`: none), for the versions that wait.
            var versioned: [String: [String: [String: Int]]] = [:]
            var offset = 0
            while true {
                let page = try await store.checked {
                    try await $0.roots(TaskQuery(statuses: [.pending, .running, .paused], limit: 1000, offset: offset))
                }
                for root in page {
                    if let owner = root.ownerID { heldBy[owner, default: 0] += 1 }
                    if let kind = root.kind, let version = root.version {
                        versioned[kind, default: [:]][version, default: [:]][root.ownerID ?? "", default: 0] += 1
                    }
                }
                guard page.count == 1000 else { break }
                offset += page.count
            }
            let ownerReports = owners.map { owner in
                let liveness = owner.liveness()
                return DoctorJSON.Owner(
                    id: owner.id, host: owner.host, pid: owner.pid, startedAt: owner.startedAt,
                    heartbeatAt: owner.heartbeatAt, stoppedAt: owner.stoppedAt, liveness: liveness.description,
                    alive: liveness.isAlive, unfinishedTasks: heldBy[owner.id] ?? 0, kinds: owner.kinds)
            }
            let alive = Set(ownerReports.filter(\.alive).map(\.id))
            let orphaned = heldBy.filter { !alive.contains($0.key) }.values.reduce(0, +)
            // What no live worker can run: pending jobs and schedules of kinds none of them registered. (An owner of
            // an older version records no kinds: nothing can be said then.)
            let live = owners.filter { alive.contains($0.id) }
            var unrunnable: [DoctorJSON.Unrunnable] = []
            var unscheduled: [DoctorJSON.Unscheduled] = []
            if !live.contains(where: { $0.kinds == nil }) {
                let running = Set(live.flatMap { $0.kinds ?? [] })
                let statistics = try await store.checked { try await $0.statistics() }
                unrunnable = statistics.pendingByKind.filter { !$0.key.isEmpty && !running.contains($0.key) }
                    .sorted { $0.key < $1.key }.map { DoctorJSON.Unrunnable(kind: $0.key, pending: $0.value) }
                unscheduled = try await store.checked { try await $0.schedules() }
                    .filter { !running.contains($0.kind) }.map { DoctorJSON.Unscheduled(name: $0.name, kind: $0.kind) }
            }
            // A versioned job that no live owner holds, of a kind some live workers registered, none of which can
            // continue its version.
            var waitingVersions: [DoctorJSON.WaitingVersion] = []
            for (kind, byVersion) in versioned.sorted(by: { $0.key < $1.key }) {
                let workers = live.filter { $0.kinds?.contains(kind) ?? false }
                guard !workers.isEmpty, !live.contains(where: { $0.kinds == nil }) else { continue }
                // Workers of a kind that fails the jobs it cannot continue fail them: those do not wait.
                let failing = workers.contains { $0.versions?[kind]?.otherwise == .fail }
                for (version, byOwner) in byVersion.sorted(by: { $0.key < $1.key })
                where !failing && !workers.contains(where: { $0.continues(kind: kind, version: version) }) {
                    let jobs = byOwner.filter { !alive.contains($0.key) }.values.reduce(0, +)
                    guard jobs > 0 else { continue }
                    let runs = Set(workers.map { $0.versions?[kind]?.description ?? "none" }).sorted()
                    waitingVersions.append(
                        DoctorJSON.WaitingVersion(kind: kind, version: version, jobs: jobs, workerVersions: runs))
                }
            }
            let report = DoctorJSON(
                path: store.location, integrity: integrity, integrityOK: integrity == ["ok"], schemaMigrations: schema,
                owners: ownerReports, tasksHeldByDeadOwners: orphaned, pendingWithoutWorker: unrunnable,
                schedulesWithoutWorker: unscheduled, versionsWithoutWorker: waitingVersions)
            if options.json {
                try JSONOutput.print(report)
            } else {
                Terminal.output("database: \(report.path.escapedForTerminal)")
                Terminal.output("integrity: " + (report.integrityOK ? Terminal.paint("ok", .green) : Terminal.paint(integrity.joined(separator: "; "), .red)))
                Terminal.output("schema: \(schema.last ?? "none") (\(schema.count) migration\(schema.count == 1 ? "" : "s"))")
                if ownerReports.isEmpty {
                    Terminal.output("owners: none")
                } else {
                    Terminal.output("owners:")
                    let rows = ownerReports.map { owner in
                        [owner.id.escapedForTerminal, owner.host.escapedForTerminal, "\(owner.pid)", Format.time(owner.startedAt), Format.time(owner.heartbeatAt),
                         Terminal.paint(owner.liveness, owner.alive ? .green : .red), "\(owner.unfinishedTasks)"]
                    }
                    for line in Format.table(header: ["ID", "HOST", "PID", "STARTED", "HEARTBEAT", "LIVENESS", "TASKS"], rows: rows) {
                        Terminal.output("  " + line)
                    }
                }
                Terminal.output("tasks held by dead owners: \(orphaned)")
                for item in unrunnable {
                    Terminal.output(
                        Terminal.paint(
                            "no running worker runs '\(item.kind.escapedForTerminal)': \(Format.count(item.pending)) pending job\(item.pending == 1 ? "" : "s") wait for one",
                            .yellow))
                }
                for item in waitingVersions {
                    Terminal.output(
                        Terminal.paint(
                            "\(Format.count(item.jobs)) job\(item.jobs == 1 ? "" : "s") of '\(item.kind.escapedForTerminal)' "
                                + "begun by version \(item.version.escapedForTerminal) wait for a worker that continues it "
                                + "(running workers: version \(item.workerVersions.joined(separator: "; ").escapedForTerminal))",
                            .yellow))
                }
                for item in unscheduled {
                    Terminal.output(
                        Terminal.paint(
                            "no running worker runs '\(item.kind.escapedForTerminal)': schedule '\(item.name.escapedForTerminal)' makes no job",
                            .yellow))
                }
            }
            if !report.integrityOK { throw CLIError("the integrity check found problems in '\(store.location)'") }
        }
    }
}
