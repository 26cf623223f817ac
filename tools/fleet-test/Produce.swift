import ArgumentParser
import Foundation
import Progression

extension FleetTest {
    /// A producer: submits jobs through JobClient (no handler, runs nothing), optionally waits for their results.
    struct Produce: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Submit fleet.double (or fleet.steps) jobs without running them; with --wait, read every result back.")

        @Option(help: "The SQLite database, or a postgres:// URL.") var db: String
        @Option(help: "How many jobs.") var count = 100
        @Option(help: "Jobs per transaction.") var batch = 100
        @Option(help: "The kind: double or steps.") var kind = "double"
        @Option(help: "Milliseconds of work of each double job.") var delay = 0
        @Option(help: "Milliseconds of the durable sleep of each steps job.") var sleep = 0
        @Option(help: "Seconds from now until the jobs may run (delayed jobs).") var runIn: Double?
        @Option(help: "Write the ids here, one per line.") var ids: String?
        @Flag(help: "Wait for every job and read its result.") var wait = false
        @Option(help: "Seconds the wait may take.") var timeout: Double = 600

        /// What `produce` prints (one JSON line).
        struct Summary: Encodable {
            var submitted: Int
            var submitSeconds: Double
            var completed: Int
            var failed: Int
            /// Results read back, by the worker that made them (double jobs).
            var byWorker: [String: Int]
            var wrongResults: Int
            var seconds: Double
        }

        func run() async throws {
            guard count >= 0, batch >= 1 else { throw ValidationError("--count must be 0 or more and --batch 1 or more") }
            let client = try await FleetDatabase.client(db: db)
            let started = ContinuousClock.now
            var submitted: [String] = []
            var next = 0
            while next < count {
                let size = min(batch, count - next)
                let options = JobOptions(delay: runIn.map { .milliseconds(Int64($0 * 1000)) })
                switch kind {
                case "double":
                    let inputs = (next..<(next + size)).map { DoubleJob.Input(n: $0, delayMilliseconds: delay) }
                    submitted += try await client.submit(DoubleJob.self, inputs: inputs) { _ in options }
                case "steps":
                    let inputs = Array(repeating: StepsJob.Input(sleepMilliseconds: sleep), count: size)
                    submitted += try await client.submit(StepsJob.self, inputs: inputs) { _ in options }
                default:
                    throw ValidationError("--kind is double or steps")
                }
                next += size
            }
            let submitSeconds = (ContinuousClock.now - started).seconds
            if let ids { try (submitted.joined(separator: "\n") + "\n").write(toFile: ids, atomically: true, encoding: .utf8) }
            var summary = Summary(
                submitted: submitted.count, submitSeconds: submitSeconds, completed: 0, failed: 0, byWorker: [:],
                wrongResults: 0, seconds: submitSeconds)
            if wait {
                for (n, id) in submitted.enumerated() {
                    let record = try await client.wait(for: id, timeout: .milliseconds(Int64(timeout * 1000)))
                    guard record.status == .completed else {
                        summary.failed += 1
                        continue
                    }
                    summary.completed += 1
                    if kind == "double" {
                        let output = try await client.result(of: id, as: DoubleJob.self)
                        summary.byWorker[output.worker, default: 0] += 1
                        if output.doubled != n * 2 { summary.wrongResults += 1 }
                    } else {
                        let output = try await client.result(of: id, as: StepsJob.self)
                        summary.byWorker[output.worker, default: 0] += 1
                    }
                }
                summary.seconds = (ContinuousClock.now - started).seconds
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(summary), as: UTF8.self))
        }
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
