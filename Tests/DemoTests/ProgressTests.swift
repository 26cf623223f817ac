import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// Issue 10: the demo's job declares its bytes up front, so that what its root shows is the share of bytes read —
/// watched from outside, through the store, as `progressctl` sees it. Issue 35: its folders are child jobs, and the
/// root's value follows theirs while it waits for them.
struct ProgressTests {
    @Test func theDemosJobReadsAsTheShareOfItsBytesAndReachesOneOnlyWhenItCompletes() async throws {
        let temp = try TemporaryDirectory()
        let data = temp.url.appendingPathComponent("data")
        var sizes: [String: Int] = [:]
        for (folder, count) in [("letters", 5), ("logs", 7), ("notes", 4)] {
            let directory = data.appendingPathComponent(folder)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            for index in 0..<count {
                let size = 1_000 * (1 + (index * 7 + folder.count) % 23)
                try Data(repeating: UInt8(ascii: "a") + UInt8(index), count: size)
                    .write(to: directory.appendingPathComponent("f\(index).txt"))
                sizes["\(folder)/f\(index).txt"] = size
            }
        }
        let totalBytes = Double(sizes.values.reduce(0, +))
        let db = temp.file("db.sqlite")
        // The job is submitted and watched before a service runs it, so that the watch sees it from its start
        // however long processes take to start on a busy machine.
        let store = try SQLiteTaskStore(path: db)
        let input = #"{"directory": "\#(data.path)", "fileDelayMilliseconds": 150, "parallelFiles": 2}"#
        let submitted = try await ChildProcess.run(
            "progressctl", ["--db", db, "submit", "--allow-unregistered", "checksum", "--input", input], in: temp)
        #expect(submitted.status == 0, "\(submitted.stderr)")
        let jobID = submitted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        // progressctl watch, in a process of its own: one line each time the root's status, percent or step changed.
        let watch = try ChildProcess("progressctl", ["--db", db, "watch", jobID, "--json"], in: temp)
        try await poll("the watch's first line") { watch.stdout.contains(#""status":"pending""#) }
        let service = try ChildProcess("progression-demo", ["serve", "--db", db], in: temp)

        // The root is read first, then its folders' jobs (where the files are): the root's value never exceeds the
        // bytes of the files under way or completed (their share moves it, through the tree keeper), never goes back,
        // and is 1 only once the job completed.
        var seen: [Double] = []
        var finished: TaskRecord?
        try await poll("the job to complete", every: .milliseconds(2)) {
            guard let root = try await store.task(id: jobID) else { return false }
            let files = try await DemoJobTree.read(jobID, from: store).filter { sizes[$0.name] != nil }
            let begun = files.filter { $0.status != .pending }.reduce(0.0) { $0 + Double(sizes[$1.name] ?? 0) }
            if let progress = root.progress {
                if root.status != .completed {
                    #expect(progress < 1, "\(root.status) at \(progress)")
                    #expect(progress <= begun / totalBytes + 1e-9, "\(progress) above \(begun) of \(totalBytes) bytes")
                }
                seen.append(progress)
            }
            if root.status.isFinished { finished = root }
            return root.status.isFinished
        }
        // How many values this loop sees depends on how often a busy test process runs it: the values in between are
        // asked of the watch below (a process of its own), the rules of each value of this loop.
        #expect(finished?.status == .completed)
        #expect(finished?.progress == 1)
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0 <= $1 }, "monotone: \(seen)")

        #expect(try await watch.waitForExit(timeout: .seconds(120)) == 0, "\(watch.stderr)")
        let lines = try watch.stdout.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
        let watched = lines.compactMap { $0["progress"] as? Double }
        #expect(zip(watched, watched.dropFirst()).allSatisfy { $0 <= $1 }, "monotone: \(watched)")
        #expect(Set(watched.filter { $0 > 0 && $0 < 1 }).count >= 3, "values in between: \(watched)")
        #expect(lines.last?["status"] as? String == "completed" && watched.last == 1)
        #expect(lines.dropLast().allSatisfy { ($0["progress"] as? Double ?? 0) < 1 }, "1 only when completed")

        // The history's progress samples say the same.
        let samples = try await store.events(EventQuery(taskID: jobID, kinds: [.progress], limit: 1_000))
            .filter { $0.taskID == jobID }.compactMap(\.progress)
        #expect(zip(samples, samples.dropFirst()).allSatisfy { $0 <= $1 }, "\(samples)")
        service.signal(SIGTERM)
        #expect(try await service.waitForExit(timeout: .seconds(120)) == 0)
    }
}
