import Foundation
import Progression
import Testing

@testable import progressctl
import ProgressionOperator

/// Task trees made in memory for the renderer.
enum DashboardFixture {
    static let start = Date(timeIntervalSince1970: 1_780_000_000)

    static func root(
        _ id: String, name: String? = nil, status: TaskStatus = .running, progress: Double? = 0.5,
        step: String? = nil, created: TimeInterval = 0, finished: TimeInterval? = nil
    ) -> TaskRecord {
        TaskRecord(
            id: id, name: name ?? "job \(id)", kind: "import", status: status, progress: progress, step: step,
            createdAt: start.addingTimeInterval(created), startedAt: start.addingTimeInterval(created),
            finishedAt: finished.map { start.addingTimeInterval($0) })
    }

    static func child(
        _ id: String, of parent: TaskRecord, name: String, status: TaskStatus, progress: Double? = nil,
        index: Int = 0
    ) -> TaskRecord {
        TaskRecord(
            id: id, parentID: parent.id, rootID: parent.rootID, name: name, status: status,
            progress: status == .completed ? 1 : progress, createdAt: start.addingTimeInterval(1 + Double(index)))
    }

    /// A job of 600 file steps: 2 running, 590 completed, 3 failed, 5 pending, in the order they were created.
    static func sixHundredFiles(id: String = "01a20337-07aa-7c1e-9f00-000000000001") -> [TaskRecord] {
        let root = root(id, name: "checksum /data", progress: 0.49, step: "hashing files")
        var nodes = [root]
        for index in 0..<600 {
            let status: TaskStatus =
                switch index {
                case 100, 350, 420: .failed
                case 590, 591: .running
                case 592...596: .pending
                default: .completed
                }
            nodes.append(child("\(id)/f\(index)", of: root, name: "file-\(index).bin", status: status,
                               progress: status == .running ? 0.3 : nil, index: index))
        }
        return nodes
    }
}

/// The cell at which `marker` (the first of its characters) starts in `line`, or `nil`.
func cellOffset(of marker: Character, in line: String) -> Int? {
    var cells = 0
    for character in line {
        if character == marker { return cells }
        cells += TerminalWidth.width(of: String(character))
    }
    return nil
}

@Suite struct DashboardTests {
    let size = TerminalSize(rows: 40, columns: 80)
    let now = DashboardFixture.start.addingTimeInterval(30)

    @Test func aJobOfSixHundredStepsFitsTheScreenWithTheHeaderAndTheRootFirst() throws {
        let tree = Dashboard.Tree(nodes: DashboardFixture.sixHundredFiles(), rate: 0.004, timeLeft: 127)
        let lines = Dashboard.render([tree], size: size, now: now, color: false)
        #expect(lines.count <= 40)
        #expect(lines.allSatisfy { TerminalWidth.width(of: $0) == 80 }, "\(lines)")
        #expect(lines[0].hasPrefix("3 running · 5 pending · 590 completed · 3 failed"), "\(lines[0])")
        #expect(lines[1].hasPrefix("checksum /data"), "\(lines[1])")
        for text in ["49%", "24%/min", "2m07s", "hashing files", "running", "01a20337"] {
            #expect(lines[1].contains(text), "\(text) in \(lines[1])")
        }
        let below = lines.dropFirst(2)
        #expect(below.filter { $0.contains("running") }.count == 2)
        #expect(below.filter { $0.contains("failed") && $0.contains("file-") }.count == 3)
        let summary = try #require(below.first { $0.contains("590 completed") })
        #expect(summary.trimmingTrailingSpaces() == "  590 completed · 3 failed · 5 pending")
        #expect(!below.contains { $0.contains("pending") && $0.contains("file-") }, "pending steps are counted only")
        #expect(lines.count == 2 + 2 + 3 + 1)
    }

    @Test func rowsThatDoNotFitAreCutBelowTheRootsAndCounted() {
        let root = DashboardFixture.root("busy", progress: 0.1)
        let children = (0..<100).map { index in
            DashboardFixture.child("busy/\(index)", of: root, name: "part \(index)", status: .running, index: index)
        }
        let other = DashboardFixture.root("other", status: .pending, progress: nil, created: 5)
        let lines = Dashboard.render(
            [Dashboard.Tree(nodes: [root] + children), Dashboard.Tree(nodes: [other])],
            size: TerminalSize(rows: 20, columns: 80), now: now, color: false)
        #expect(lines.count == 20)
        #expect(lines[0].hasPrefix("101 running · 1 pending"))
        #expect(lines[1].hasPrefix("job busy"))
        // Both roots are kept; the running parts fill what is left but one line, which counts the rest.
        #expect(lines.contains { $0.hasPrefix("job other") })
        #expect(lines.filter { $0.hasPrefix("  part ") }.count == 16)
        #expect(lines[19].trimmingTrailingSpaces() == "… 84 more")
    }

    @Test func withMoreRootsThanRowsTheUnfinishedComeFirstAndTheRestIsCounted() {
        var trees: [Dashboard.Tree] = []
        for index in 0..<30 {
            let finished = index % 3 == 0
            trees.append(Dashboard.Tree(nodes: [DashboardFixture.root(
                "r\(index)", status: finished ? .completed : .running, progress: finished ? 1 : 0.2,
                created: Double(index), finished: finished ? 100 + Double(index) : nil)]))
        }
        let lines = Dashboard.render(trees, size: TerminalSize(rows: 10, columns: 80), now: now, color: false)
        #expect(lines.count == 10)
        #expect(lines[1...8].allSatisfy { $0.contains("running") })
        #expect(lines[1].hasPrefix("job r1 "), "oldest unfinished first")
        #expect(lines[9].trimmingTrailingSpaces() == "… 22 more")

        let roomy = Dashboard.render(trees, size: TerminalSize(rows: 40, columns: 80), now: now, color: false)
        let finished = roomy.filter { $0.hasPrefix("job") && $0.contains("completed") }
        #expect(finished.first?.hasPrefix("job r27 ") == true, "most recently finished first: \(finished)")
        #expect(finished.count == 10)
    }

    @Test func namesOfAnyWidthKeepTheColumnsAligned() {
        let long = String(repeating: "very-long-name-", count: 14).prefix(200)
        let roots = [
            DashboardFixture.root("a-long", name: String(long), progress: 0.25, step: "reading"),
            DashboardFixture.root("b-cjk", name: "日本語のファイル名.txt", progress: 0.5, step: "解析中", created: 1),
            DashboardFixture.root("c-emoji", name: "📦 package", progress: 0.75, step: "📦 packing", created: 2),
            DashboardFixture.root("d-plain", name: "plain", progress: 1, step: "done", created: 3),
        ]
        var trees = roots.map { Dashboard.Tree(nodes: [$0], rate: 0.01, timeLeft: 42) }
        trees[1].nodes.append(DashboardFixture.child(
            "b-cjk/1", of: roots[1], name: "子タスク 🚀 ünïcödé\u{301}", status: .running, progress: 0.4))
        for columns in [40, 60, 80, 100, 132] {
            let lines = Dashboard.render(trees, size: TerminalSize(rows: 40, columns: columns), now: now, color: false)
            #expect(lines.count == 6)
            for line in lines {
                #expect(TerminalWidth.width(of: line) == columns, "\(columns): \(line)")
            }
            let taskRows = lines.dropFirst()
            // Where the percent ends and where the status begins are the same on every task row.
            let percentEnds = Set(taskRows.compactMap { cellOffset(of: "%", in: $0) })
            #expect(percentEnds.count == 1, "\(columns): \(Array(taskRows))")
            if columns >= 60 {
                let statusStarts = Set(taskRows.map { line in
                    ["running", "completed"].compactMap { word in
                        line.range(of: word).map { TerminalWidth.width(of: line[..<$0.lowerBound]) }
                    }.min() ?? -1
                })
                #expect(statusStarts.count == 1, "\(columns): \(Array(taskRows))")
            }
        }
    }

    @Test func controlCharactersInNamesAndStepsAreEscaped() {
        let root = DashboardFixture.root(
            "ctl", name: "evil\nname\twith\u{1B}[31mred\u{7}", progress: 0.5, step: "line1\r\nline2")
        let wide = TerminalSize(rows: 40, columns: 160)
        let lines = Dashboard.render([Dashboard.Tree(nodes: [root])], size: wide, now: now, color: false)
        #expect(lines[1].contains("evil\\nname\\twith\\e[31mred\\x07"), "\(lines[1])")
        #expect(lines[1].contains("line1\\r\\nline2"))
        for line in lines {
            #expect(!line.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "\(line)")
            #expect(TerminalWidth.width(of: line) == 160)
        }
    }

    @Test func colourOnlyWhenAskedAndItTakesNoCells() {
        let tree = Dashboard.Tree(nodes: DashboardFixture.sixHundredFiles())
        let plain = Dashboard.render([tree], size: size, now: now, color: false)
        let coloured = Dashboard.render([tree], size: size, now: now, color: true)
        #expect(!plain.joined().contains("\u{1B}"))
        #expect(coloured[1].contains("\u{1B}[36mrunning\u{1B}[0m"))
        #expect(coloured.joined().contains("\u{1B}[31mfailed\u{1B}[0m"))
        let stripped = coloured.map {
            $0.replacingOccurrences(of: "\u{1B}\\[[0-9;]*m", with: "", options: .regularExpression)
        }
        #expect(stripped == plain)
    }

    @Test func nestedTreesShowOnlyWhatNeedsAttentionIndented() {
        let root = DashboardFixture.root("nest", progress: 0.4)
        let done = DashboardFixture.child("nest/1", of: root, name: "download", status: .completed, index: 0)
        let stage = DashboardFixture.child("nest/2", of: root, name: "parse", status: .running, progress: 0.5, index: 1)
        let later = DashboardFixture.child("nest/3", of: root, name: "upload", status: .pending, index: 2)
        let files = (0..<5).map { index in
            DashboardFixture.child(
                "nest/2/\(index)", of: stage, name: "part \(index)",
                status: index < 3 ? .completed : (index == 3 ? .running : .failed), progress: 0.2, index: 3 + index)
        }
        let nodes = [root, done, stage] + files + [later]
        let lines = Dashboard.render([Dashboard.Tree(nodes: nodes)], size: size, now: now, color: false)
            .map { $0.trimmingTrailingSpaces() }
        #expect(lines.count == 7, "\(lines)")
        #expect(lines[1].hasPrefix("job nest"))
        #expect(lines[2].hasPrefix("  parse "))
        #expect(lines[3].hasPrefix("    part 3 "))
        #expect(lines[4].hasPrefix("    part 4 ") && lines[4].contains("failed"))
        #expect(lines[5] == "    3 completed · 1 failed")
        #expect(lines[6] == "  1 completed · 1 pending")
    }

    @Test func aParentsLinksShowTheirChildJobsIdAndTheRunningChildsStepsBelowThem() {
        var parent = DashboardFixture.root("parent", status: .pending, progress: 0.3)
        parent.wait = .children(all: true)
        parent.waitingFor = "2 child jobs"
        var running = DashboardFixture.child("parent.1", of: parent, name: "part a", status: .running, progress: 0.5)
        running.childJobID = "c1"
        var waiting = DashboardFixture.child("parent.2", of: parent, name: "part b", status: .pending, index: 1)
        waiting.childJobID = "c2"
        var child = DashboardFixture.root("c1", name: "part a", progress: 0.5)
        child.parentJobID = "parent"
        let step = DashboardFixture.child("c1.1", of: child, name: "crunch", status: .running, progress: 0.5)
        var view = JobTreeView(nodes: [parent, running, waiting])
        view.childJobs = ["c1": child]
        view.expanded = ["c1": [child, step]]
        let lines = Dashboard.render([Dashboard.Tree(nodes: view.graftedNodes)], size: size, now: now, color: false)
            .map { $0.trimmingTrailingSpaces() }
        #expect(lines.count == 5, "\(lines)")
        #expect(lines[1].hasPrefix("job parent") && lines[1].contains("for 2 child jobs") && lines[1].contains("waiting"))
        #expect(lines[2].hasPrefix("  part a ") && lines[2].hasSuffix("running  c1"), "the link names its child job")
        #expect(lines[3].hasPrefix("    crunch ") && lines[3].contains("running"), "the child's step below its link")
        #expect(lines[4] == "  1 pending")
    }

    @Test(arguments: [1, 2, 3, 5, 12, 40], [1, 8, 20, 40, 60, 80, 200])
    func everyFrameFitsAnySize(rows: Int, columns: Int) {
        let trees = [
            Dashboard.Tree(nodes: DashboardFixture.sixHundredFiles(), rate: 0.001, timeLeft: 4000),
            Dashboard.Tree(nodes: [DashboardFixture.root("日本語", name: "日本語のファイル名.txt", created: 3)]),
            Dashboard.Tree(nodes: [DashboardFixture.root("pkg", name: "📦 package", status: .failed, finished: 9)]),
        ]
        let lines = Dashboard.render(trees, size: TerminalSize(rows: rows, columns: columns), now: now, color: false)
        #expect(lines.count <= rows)
        #expect(lines.count == min(rows, 2 + 2 + 3 + 1 + 2))
        for line in lines {
            #expect(TerminalWidth.width(of: line) == columns, "\(rows)×\(columns): \(line)")
        }
    }

    @Test func withNothingToWatchItSaysItWaits() {
        let lines = Dashboard.render([], size: size, now: now, color: false)
        #expect(lines.count == 2)
        #expect(lines[0].hasPrefix("no tasks"))
        #expect(lines[0].trimmingTrailingSpaces().hasSuffix(Dashboard.clock(now)))
        #expect(lines[1].contains("waiting for pending, running or paused tasks"))
    }

    @Test func shortIDsAreEightCharactersUnlessTwoRootsShareThem() {
        let roots = ["01a20337-07aa-1", "01a20337-07ab-2", "ffffffff-0000", "w1"].map { DashboardFixture.root($0) }
        let ids = Dashboard.shortIDs(of: roots)
        #expect(ids == [
            "01a20337-07aa-1": "01a20337-07aa", "01a20337-07ab-2": "01a20337-07ab", "ffffffff-0000": "ffffffff",
            "w1": "w1",
        ])
    }
}
