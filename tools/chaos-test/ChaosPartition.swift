import ArgumentParser
import Foundation
import Progression
import ProgressionTestSupport
#if PostgreSQL
import ProgressionPostgres
import ProgressionPostgresTestSupport
#endif

#if canImport(Glibc)
import Glibc
#endif

extension ChaosTest {
    /// Workers in network namespaces of their own (`ip netns`, a veth pair each, PostgreSQL on the host's side over
    /// TCP); one is cut off (its link down) while it runs jobs. The others must take its jobs once its heartbeat is
    /// stale; once the link is up again its late writes must be rejected, it must stop that work, and it must take new
    /// work. Skipped, saying why, where namespaces cannot be made (not root, no `ip`, no permission).
    struct Partition: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Cut a worker off the network while it runs jobs.")

        @Option(help: "Jobs (each: 3 steps of 2 substeps).") var jobs = 60
        @Option(help: "Milliseconds of work per substep.") var milliseconds = 200
        @Option(help: "Seconds without a heartbeat after which a worker counts as dead.") var staleAfter = 3.0
        @Option(help: "Keep the ledger and the workers' output in this directory (default: a temporary one, removed).")
        var directory: String?

        func run() async throws {
            #if PostgreSQL
            if let reason = Network.unavailableReason() {
                print("chaos-test partition: skipped: \(reason)")
                return
            }
            let directory = directory ?? (NSTemporaryDirectory() + "progression-partition-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            var keep = self.directory != nil
            defer { if !keep { try? FileManager.default.removeItem(atPath: directory) } }
            let network = try Network(hosts: 3)
            defer { network.remove() }
            let server = try LocalPostgresServer(
                durable: false, tcpAddresses: network.hostAddresses, tcpPort: Int.random(in: 20_000...60_000))
            defer { server.stop() }
            let schema = "partition"
            let ledger = Ledger(path: directory + "/ledger.txt")
            var ids = try await ChaosJobs.submit(
                jobs, configuration: server.configuration(schema: schema), milliseconds: milliseconds)
            let store = try await PostgresTaskStore.started(configuration: server.configuration(schema: schema))
            defer { Task { await store.close() } }

            var workers: [ChildProcess] = []
            for host in 0..<3 {
                workers.append(
                    try ChaosJobs.worker(
                        ["--db", server.tcpURL(address: network.hostAddresses[host], schema: schema), "--ledger",
                         ledger.path, "--host", "ns-\(host)", "--stale-after", "\(staleAfter)", "--concurrency", "4"],
                        name: "worker-\(host)", directory: directory, wrapper: network.exec(host)))
            }
            defer { for worker in workers { worker.signal(SIGKILL) } }
            try await ChaosJobs.waitFor("3 workers to start", timeout: .seconds(60)) { ledger.owners().count == 3 }
            let ownerOf = Dictionary(uniqueKeysWithValues: ledger.owners().map { ($0.value, $0.key) })
            // The worker of namespace 0.
            var owner: String?
            try await ChaosJobs.waitFor("the owner record of ns-0", timeout: .seconds(60)) {
                owner = try await Self.owner(of: "ns-0", store: store)
                return owner != nil
            }
            guard let cutOwner = owner else { throw ChaosFailure("no owner record of ns-0") }
            var violations: [String] = []
            var held: [String] = []
            try await ChaosJobs.waitFor("ns-0 to run 3 jobs at once", timeout: .seconds(60)) {
                held = try await Self.running(heldBy: cutOwner, store: store)
                return held.count >= 3
            }
            try network.setLink(0, up: false)
            let cutAt = ContinuousClock.now
            try await ChaosJobs.waitFor("the others to take ns-0's jobs", timeout: .seconds(60)) {
                let stillHeld = try await Self.running(heldBy: cutOwner, store: store)
                let cutJobsTaken = try await held.asyncAll { id in try await store.task(id: id)?.ownerID != cutOwner }
                return stillHeld.isEmpty && cutJobsTaken
            }
            let takenAfter = ContinuousClock.now - cutAt
            if takenAfter < .milliseconds(Int64(staleAfter * 1000)) - .milliseconds(500) {
                violations.append("ns-0's jobs were taken \(takenAfter) after the cut, before its heartbeat went stale")
            }
            try network.setLink(0, up: true)
            let healedAt = Date()
            do {
                try await ChaosJobs.waitFor("ns-0 to find its writes rejected and stop that work", timeout: .seconds(60)) {
                    workers[0].stdout.contains("lost tasks to another owner")
                }
                try await ChaosJobs.waitFor("ns-0 to write again", timeout: .seconds(60)) {
                    (try await store.owners()).contains { $0.id == cutOwner && $0.heartbeatAt > healedAt }
                }
            } catch {
                violations.append("\(error)")
            }
            // It takes new work: the others stop, new jobs arrive.
            for index in [1, 2] {
                workers[index].signal(SIGTERM)
                if (try? await workers[index].waitForExit(timeout: .seconds(20))) != 0 {
                    violations.append("ns-\(index) did not exit 0 on SIGTERM")
                }
            }
            let late = try await ChaosJobs.submit(
                5, configuration: server.configuration(schema: schema), milliseconds: 20, prefix: "late")
            ids += late
            do {
                try await ChaosJobs.waitFor("every job to complete", timeout: .seconds(180)) {
                    try await ids.asyncAll { id in try await store.task(id: id)?.status == .completed }
                }
            } catch {
                violations.append("\(error)")
            }
            for id in late where try await store.task(id: id)?.ownerID != cutOwner {
                violations.append("new job \(id) did not run on ns-0")
            }
            workers[0].signal(SIGTERM)
            if (try? await workers[0].waitForExit(timeout: .seconds(20))) != 0 {
                violations.append("ns-0 did not exit 0 on SIGTERM")
            }
            let outcome = try await ChaosJobs.check(ids: ids, store: store, ledger: ledger)
            violations += outcome.violations
            _ = ownerOf
            print(
                "chaos-test partition: workers=3 jobs=\(ids.count) completed=\(outcome.completed) "
                    + "cut_jobs=\(held.count) taken_after_s=\(String(format: "%.1f", Double(takenAfter.components.seconds) + Double(takenAfter.components.attoseconds) / 1e18)) "
                    + "fenced=\(workers[0].stdout.contains("lost tasks to another owner") ? "yes" : "no") "
                    + "steps_rerun_after_commit=\(outcome.rerunAfterCommit) steps_rerun_uncommitted=\(outcome.rerunUncommitted) "
                    + "new_jobs_on_cut_worker=\(late.count - violations.filter { $0.hasPrefix("new job") }.count)/\(late.count)")
            if !violations.isEmpty {
                keep = true
                for violation in violations.prefix(20) { report("chaos-test partition: \(violation)") }
                report("chaos-test partition: ledger and worker output kept in \(directory)")
                throw ExitCode(1)
            }
            #else
            throw ChaosFailure("the chaos test needs a build with the PostgreSQL trait (swift build --traits PostgreSQL)")
            #endif
        }

        #if PostgreSQL
        static func owner(of host: String, store: PostgresTaskStore) async throws -> String? {
            try await store.owners().first { $0.host == host && $0.stoppedAt == nil }?.id
        }

        static func running(heldBy owner: String, store: PostgresTaskStore) async throws -> [String] {
            try await store.roots(TaskQuery(statuses: [.running], limit: 1_000)).filter { $0.ownerID == owner }.map(\.id)
        }
        #endif
    }
}

/// Network namespaces with a veth pair each: the namespace's end has `10.231.N.2/30`, the host's end
/// `10.231.N.1/30`. Removed (with their links) by ``remove()``.
struct Network {
    let tag: String
    let count: Int

    var hostAddresses: [String] { (0..<count).map { "10.231.\($0 + 1).1" } }

    func namespace(_ index: Int) -> String { "\(tag)-\(index)" }
    func hostLink(_ index: Int) -> String { "\(tag)h\(index)" }

    /// The command prefix that runs a program in namespace `index`.
    func exec(_ index: Int) -> [String] { [Self.ip, "netns", "exec", namespace(index)] }

    static var ip: String {
        ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first { FileManager.default.isExecutableFile(atPath: $0) }
            ?? "ip"
    }

    /// Why namespaces cannot be made here, or `nil` when they can.
    static func unavailableReason() -> String? {
        guard geteuid() == 0 else { return "network namespaces need root (ip netns add); CI runs as root" }
        guard FileManager.default.isExecutableFile(atPath: ip) else { return "no 'ip' command (Debian: iproute2)" }
        let probe = "pgc\(UInt16.random(in: 0...UInt16.max))"
        guard (try? Self.run([ip, "netns", "add", probe])) != nil else {
            return "'ip netns add' is not allowed on this machine"
        }
        _ = try? Self.run([ip, "netns", "del", probe])
        return nil
    }

    init(hosts: Int) throws {
        tag = "pgc\(String(UInt16.random(in: 0...UInt16.max), radix: 16))"
        count = hosts
        do {
            for index in 0..<hosts {
                let ns = namespace(index)
                let host = hostLink(index)
                let inside = "\(tag)n\(index)"
                try Self.run([Self.ip, "netns", "add", ns])
                try Self.run([Self.ip, "link", "add", host, "type", "veth", "peer", "name", inside])
                try Self.run([Self.ip, "link", "set", inside, "netns", ns])
                try Self.run([Self.ip, "addr", "add", "10.231.\(index + 1).1/30", "dev", host])
                try Self.run([Self.ip, "link", "set", host, "up"])
                try Self.run([Self.ip, "netns", "exec", ns, Self.ip, "addr", "add", "10.231.\(index + 1).2/30", "dev", inside])
                try Self.run([Self.ip, "netns", "exec", ns, Self.ip, "link", "set", inside, "up"])
                try Self.run([Self.ip, "netns", "exec", ns, Self.ip, "link", "set", "lo", "up"])
            }
        } catch {
            remove()
            throw error
        }
    }

    /// Takes the host's end of namespace `index`'s link down (nothing crosses) or up again.
    func setLink(_ index: Int, up: Bool) throws {
        try Self.run([Self.ip, "link", "set", hostLink(index), up ? "up" : "down"])
    }

    func remove() {
        for index in 0..<count {
            _ = try? Self.run([Self.ip, "link", "del", hostLink(index)])
            _ = try? Self.run([Self.ip, "netns", "del", namespace(index)])
        }
    }

    @discardableResult
    static func run(_ command: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else {
            throw ChaosFailure("\(command.joined(separator: " ")) failed: \(text)")
        }
        return text
    }
}

extension Sequence {
    func asyncAll(_ predicate: (Element) async throws -> Bool) async rethrows -> Bool {
        for element in self where try await !predicate(element) { return false }
        return true
    }
}
