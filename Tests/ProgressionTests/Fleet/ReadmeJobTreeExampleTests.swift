import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// The README's screen of job-tree code ("Job trees: child jobs across the fleet"), as written there but for the
/// bodies it leaves out: an album's images resized as child jobs, their results summed as each comes, a signal
/// awaited before publishing, and a report submitted to run after the album.
@Suite struct ReadmeJobTreeExampleTests {
    struct Resize: JobKind {
        struct Input: Codable, Sendable { var path: String }
        static let name = "resize"
        func run(_ input: Input, context: any TaskContext) async throws -> Int { input.path.count }
    }

    struct Album: JobKind {
        struct Input: Codable, Sendable { var paths: [String] }
        static let name = "album"
        static let options = TaskOptions.interactive.retryable()
        func run(_ input: Input, context: any TaskContext) async throws -> Int {
            let children = try await context.startChildren(Resize.self, inputs: input.paths.map { .init(path: $0) }) {
                ChildJobOptions(name: $0.path, weight: 1)
            }
            var bytes = 0
            for try await done in context.completions(of: children) {
                bytes += try done.output()
            }
            let approval = try await context.signal("publish", as: String.self, timeout: .seconds(86_400))
            try await context.push("publish to \(approval)") { _ in }
            return bytes
        }
    }

    struct Report: JobKind {
        struct Input: Codable, Sendable {}
        static let name = "report"
        func run(_ input: Input, context: any TaskContext) async throws -> String { "reported" }
    }

    @Test func theReadmesJobTreeExampleRuns() async throws {
        let database = try SharedDatabase(.sqlite)
        let worker = try database.worker(slots: 1) { $0.recoveryInterval = .milliseconds(200) }
        try worker.register(Resize())
        try worker.register(Album())
        try worker.register(Report())
        try await worker.start()
        let jobs = try database.producer()
        let paths = ["a.png", "bb.png", "ccc.png"]

        let album = try await jobs.submit(Album.self, input: .init(paths: paths))
        let report = try await jobs.submit(Report.self, input: .init(), options: JobOptions(after: [album]))
        try await jobs.signal(album, name: "publish", payload: "gallery")

        #expect(try await jobs.result(of: album, as: Album.self, timeout: .seconds(120)) == 18)
        #expect(try await jobs.result(of: report, as: Report.self, timeout: .seconds(120)) == "reported")
        let steps = try await jobs.store.tree(of: album).map(\.name)
        #expect(steps.contains("publish to gallery"), "\(steps)")
        await worker.shutdown()
        await database.closeAll()
    }
}
