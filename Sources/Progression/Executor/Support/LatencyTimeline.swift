import Synchronization

/// Marks along one job's way, from a ``JobClient``'s submit to its result read, for `progression-bench`'s latency
/// scenarios (`--only job-latency,postgres-latency`): where the latency of one job goes, stage by stage.
///
/// Marks are recorded only in a build with the package's `LatencyTimeline` trait (`swift build -c release --product
/// progression-bench --traits PostgreSQL,LatencyTimeline`). In any other build ``mark(_:)`` is an empty function that
/// is inlined away, so the executor's hot path pays nothing for it.
package enum LatencyTimeline {
    /// A point of a job's way, in the order a job passes them.
    package enum Point: CaseIterable, Sendable {
        /// `JobClient.submit` was called.
        case submitBegan
        /// The submit's transaction committed and its call returned to the client.
        case submitCommitted
        /// A worker's claim pass calls its store.
        case claimBegan
        /// The claim's call to the store returned to the worker.
        case claimReturned
        /// The root's run task began.
        case runBegan
        /// The job's code is called.
        case codeBegan
        /// The job's code returned.
        case codeReturned
        /// The writer calls its store with a batch.
        case batchBegan
        /// The batch committed and its call returned to the writer.
        case batchCommitted
        /// The writer told a `JobClient` of this process the roots whose end it committed.
        case endTold
        /// `JobClient.result(of:as:)` returned.
        case resultReturned

        /// What the stage that ends at this point is.
        package var stage: String {
            switch self {
            case .submitBegan: "(start)"
            case .submitCommitted: "submit: to the store, its transaction, back"
            case .claimBegan: "a worker's claim pass wakes and begins"
            case .claimReturned: "claim: to the store, its transaction (the start with it), back"
            case .runBegan: "the root's run task begins"
            case .codeBegan: "the run reaches the job's code"
            case .codeReturned: "the job's code"
            case .batchBegan: "the end reaches the writer"
            case .batchCommitted: "the end's batch: its transaction, back to the writer"
            case .endTold: "the end told to the waiting client"
            case .resultReturned: "the client wakes and returns the result"
            }
        }
    }

    /// Whether this build records marks (the `LatencyTimeline` trait).
    package static var isRecording: Bool {
        #if LatencyTimeline
        true
        #else
        false
        #endif
    }

    #if LatencyTimeline
    private static let marks = Mutex<[(point: Point, at: ContinuousClock.Instant)]>([])
    #endif

    /// Records that `point` is passed now (nothing without the trait).
    @inline(__always)
    package static func mark(_ point: Point) {
        #if LatencyTimeline
        let now = ContinuousClock.now
        marks.withLock { $0.append((point, now)) }
        #endif
    }

    /// The marks recorded so far, in order, and forgets them.
    package static func take() -> [(point: Point, at: ContinuousClock.Instant)] {
        #if LatencyTimeline
        marks.withLock { marks in
            defer { marks.removeAll() }
            return marks
        }
        #else
        []
        #endif
    }

    /// Each job's stages, from marks of jobs run one at a time: a job's marks begin at its `submitBegan`. Its stage
    /// of each later point is the time from the point before it that the job passed to the first mark of that point
    /// at or after it (a point passed many times — a claim pass that finds nothing, a batch of other changes — counts
    /// once; a point not passed adds its time to the next stage).
    package static func stages(_ marks: [(point: Point, at: ContinuousClock.Instant)]) -> [[Point: Duration]] {
        var jobs: [[(point: Point, at: ContinuousClock.Instant)]] = []
        for mark in marks {
            if mark.point == .submitBegan {
                jobs.append([mark])
            } else if !jobs.isEmpty {
                jobs[jobs.count - 1].append(mark)
            }
        }
        return jobs.map { job in
            var stages: [Point: Duration] = [:]
            var last = job[0]
            for point in Point.allCases.dropFirst() {
                guard let next = job.first(where: { $0.point == point && $0.at >= last.at }) else { continue }
                stages[point] = last.at.duration(to: next.at)
                last = next
            }
            return stages
        }
    }
}
