import Progression
import Testing

/// The stages of jobs' ways from their marks (``LatencyTimeline/stages(_:)``), as `progression-bench` prints them in a
/// build with the `LatencyTimeline` trait; and that a build without it records nothing.
struct LatencyTimelineTests {
    typealias Point = LatencyTimeline.Point

    /// Marks at the given microseconds after a common start.
    static func marks(_ points: [(Point, Int)]) -> [(point: Point, at: ContinuousClock.Instant)] {
        let start = ContinuousClock.now
        return points.map { ($0.0, start.advanced(by: .microseconds($0.1))) }
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var marks: [(Point, Int)]
        /// Each job's stages, in µs.
        var stages: [[Point: Int]]
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(
            name: "one job through every point",
            marks: Point.allCases.enumerated().map { ($1, $0 * 10) },
            stages: [Dictionary(uniqueKeysWithValues: Point.allCases.dropFirst().map { ($0, 10) })]),
        Row(
            name: "two jobs, each from its own submit",
            marks: [(.submitBegan, 0), (.submitCommitted, 100), (.submitBegan, 500), (.submitCommitted, 530)],
            stages: [[.submitCommitted: 100], [.submitCommitted: 30]]),
        Row(
            name: "a point passed twice counts its first time after the point before",
            marks: [
                (.submitBegan, 0), (.batchBegan, 5), (.batchCommitted, 20), (.submitCommitted, 40),
                (.batchBegan, 60), (.batchCommitted, 90), (.batchBegan, 95),
            ],
            stages: [[.submitCommitted: 40, .batchBegan: 20, .batchCommitted: 30]]),
        Row(
            name: "a point not passed adds its time to the next stage",
            marks: [(.submitBegan, 0), (.submitCommitted, 10), (.runBegan, 50), (.resultReturned, 80)],
            stages: [[.submitCommitted: 10, .runBegan: 40, .resultReturned: 30]]),
        Row(
            name: "marks before the first submit belong to no job",
            marks: [(.batchBegan, 0), (.submitBegan, 10), (.submitCommitted, 25)],
            stages: [[.submitCommitted: 15]]),
        Row(name: "no marks", marks: [], stages: []),
    ]

    @Test(arguments: rows)
    func stagesRunFromEachPointPassedToTheNext(row: Row) {
        let stages = LatencyTimeline.stages(Self.marks(row.marks))
        #expect(stages.map { $0.mapValues { Int($0 / .microseconds(1)) } } == row.stages)
    }

    /// A build without the `LatencyTimeline` trait (the tests' own) keeps no marks.
    @Test(.enabled(if: !LatencyTimeline.isRecording)) func withoutTheTraitNothingIsRecorded() {
        LatencyTimeline.mark(.submitBegan)
        LatencyTimeline.mark(.resultReturned)
        #expect(LatencyTimeline.take().isEmpty)
    }
}
