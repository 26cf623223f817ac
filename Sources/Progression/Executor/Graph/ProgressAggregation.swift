import Foundation

/// What a task has said about its work, and what its current subtasks add: the inputs of its progress.
///
/// The rule (the README's "How a task's progress is computed" gives worked examples):
///
/// - **Declared total** (`.total(t)`, units mode): `progress = (done + Σ wᵢ·pᵢ) / t` over unfinished subtasks, each
///   weighing `wᵢ` units of the total; a finished subtask adds `wᵢ` to `done` (a failed or cancelled one `wᵢ·pᵢ`,
///   the work it really did); `.completed(u)` sets `done` to `u`, `.progress(x)` to `x·t`, `.step(n, of: m)` to
///   `t·n/m`.
/// - **Steps** (`.step(n, of: m)`): `n/m + (1/m) · Σ wᵢ·pᵢ / Σ wᵢ` over the subtasks pushed since that report: they
///   share the step under way, by relative weight.
/// - **Fraction** (`.progress(x)`): `x + (1 − x) · Σ wᵢ·pᵢ / Σ wᵢ` over the subtasks pushed since that report.
/// - **Nothing said**: indeterminate (`nil`) whatever the subtasks do, since nobody knows what share of the task they
///   are; it gets a value from its first report (or `1` when it completes).
///
/// Then: the value shown never moves back while the task runs (it holds until the work catches up), a task that has
/// not completed shows at most ``unfinishedCap``, and only a completed task shows 1. A failed or cancelled task keeps
/// the value it had.
struct ProgressState {
    enum Mode: Equatable {
        case unknown, fraction, steps, units
    }

    /// The most a task that has not completed shows.
    static let unfinishedCap = 0.999

    var mode = Mode.unknown
    /// Units mode: the declared total.
    var total: Double?
    /// Units mode: units done by the task itself and by its finished subtasks. Fraction and steps modes: the task's
    /// own fraction.
    var own = 0.0
    /// Fraction and steps modes: the share of the task that the current segment's subtasks carry.
    var span = 0.0
    /// Bumped by every own report: subtasks pushed before it no longer count (fraction and steps modes).
    var segment = 0
    var segmentWeight = 0.0
    var segmentDone = 0.0
    /// Units mode: Σ wᵢ·pᵢ of the unfinished subtasks.
    var unitsInFlight = 0.0
    /// The value shown before this run (a retry or a resumed job): the shown value does not drop below it.
    var floor: Double?

    /// How a subtask counts in its parent.
    enum Link: Equatable {
        /// Not counted (pushed before the parent's last own report, or finished and banked).
        case none
        /// In the parent's segment of this number.
        case segment(Int)
        /// In the parent's declared total.
        case units
    }

    /// How this node counts in its parent, and the value it last contributed.
    var link = Link.none
    var contribution = 0.0

    /// The value from the task's own reports and its subtasks; `nil` when indeterminate.
    var computed: Double? {
        switch mode {
        case .unknown:
            return nil
        case .units:
            guard let total, total > 0 else { return nil }
            return (own + unitsInFlight) / total
        case .fraction, .steps:
            let children = segmentWeight > 0 ? span * segmentDone / segmentWeight : 0
            return own + children
        }
    }

    /// The value before the cap: what the task has done, never below what it showed. This is what it contributes to
    /// its parent, so that a step that read all its bytes but has not returned yet weighs all of them there (capped
    /// at 0.999, it would leave its parent below the share of the steps already completed).
    func held(current: Double?) -> Double? {
        var highest = computed
        if let floor { highest = Swift.max(highest ?? floor, floor) }
        if let current { highest = Swift.max(highest ?? current, current) }
        return highest.map { Swift.min(1, Swift.max(0, $0)) }
    }

    /// Forgets what the task said and what its subtasks did (a new run); the value shown so far becomes the floor.
    mutating func reset(floor: Double?) {
        let link = self.link
        let contribution = self.contribution
        self = ProgressState()
        self.floor = floor.map { min(Self.unfinishedCap, $0) }
        self.link = link
        self.contribution = contribution
    }
}

/// A smoothed rate of progress, in fraction of the task per second: an exponential moving average of the progress
/// made between samples taken at least ``sampleInterval`` apart, with a time constant of ``timeConstant``.
struct RateState {
    static let sampleInterval: TimeInterval = 0.5
    static let timeConstant: TimeInterval = 10

    var lastValue: Double?
    var lastAt: Date?
    var rate: Double?

    /// Whether a sample taken now would count (the last one is old enough).
    func isDue(at now: Date) -> Bool {
        guard let lastAt else { return true }
        return now.timeIntervalSince(lastAt) >= Self.sampleInterval
    }

    /// Takes a sample of the task's value; returns whether the rate changed.
    mutating func sample(_ value: Double, at now: Date) -> Bool {
        guard let lastAt, let lastValue else {
            self.lastAt = now
            self.lastValue = value
            return false
        }
        let elapsed = now.timeIntervalSince(lastAt)
        guard elapsed >= Self.sampleInterval else { return false }
        let instant = max(0, value - lastValue) / elapsed
        let weight = 1 - exp(-elapsed / Self.timeConstant)
        rate = rate.map { $0 + weight * (instant - $0) } ?? instant
        self.lastAt = now
        self.lastValue = value
        return true
    }

    /// Starts over (a pause, a resume, a new attempt): the time in between does not count.
    mutating func restart() {
        self = RateState()
    }
}

extension GraphState {
    /// Applies a task's own report (validated already) to its progress.
    ///
    /// - Throws: ``ProgressionError/invalidProgressValue(_:)`` for units done without (or beyond) a declared total.
    mutating func applyReport(_ report: TaskProgress, to node: TaskNode, now: Date) throws(ProgressionError) {
        var state = node.progress
        if let total = report.total {
            if state.mode != .units {
                // Switching to units: the task's own part is kept, earlier subtasks no longer count.
                state.own = (state.mode == .unknown ? 0 : state.own) * total
                state.unitsInFlight = 0
                state.segment += 1
                state.segmentWeight = 0
                state.segmentDone = 0
            } else if let old = state.total, old != total {
                state.own = state.own / old * total
            }
            state.mode = .units
            state.total = total
            if node.record.total != total {
                node.record.total = total
                markDirty(node, .total)
            }
        }
        if let units = report.completedUnits {
            guard state.mode == .units, let total = state.total else {
                throw ProgressionError.invalidProgressValue(
                    "\(units) units done, but the task declared no total (report .total(_:) first)")
            }
            guard units <= total else {
                throw ProgressionError.invalidProgressValue("\(units) units done of a declared total of \(total)")
            }
            state.own = units
        } else if report.total == nil, let fraction = report.fraction {
            if state.mode == .units, let total = state.total {
                state.own = fraction * total
            } else {
                state.mode = report.stepCount == nil ? .fraction : .steps
                state.own = fraction
                state.span = report.stepCount.map { 1 / Double($0) } ?? (1 - fraction)
                state.span = min(state.span, 1 - fraction)
                state.segment += 1
                state.segmentWeight = 0
                state.segmentDone = 0
            }
        }
        node.progress = state
        recompute(node, now: now)
    }

    /// Counts a subtask in its parent: in the declared total, or in the current segment.
    mutating func join(_ child: TaskNode, parent: TaskNode, weight: Double, contribution: Double, now: Date) {
        unjoin(child, from: parent)
        child.record.weight = weight
        child.progress.contribution = contribution
        switch parent.progress.mode {
        case .units:
            child.progress.link = .units
            parent.progress.unitsInFlight += weight * contribution
        case .unknown, .fraction, .steps:
            child.progress.link = .segment(parent.progress.segment)
            parent.progress.segmentWeight += weight
            parent.progress.segmentDone += weight * contribution
        }
        recompute(parent, now: now)
    }

    /// Takes a subtask's contribution out of its parent (it runs again, or is counted anew).
    func unjoin(_ child: TaskNode, from parent: TaskNode) {
        let weight = child.record.weight
        switch child.progress.link {
        case .units:
            parent.progress.unitsInFlight -= weight * child.progress.contribution
        case .segment(let segment) where segment == parent.progress.segment:
            parent.progress.segmentWeight -= weight
            parent.progress.segmentDone -= weight * child.progress.contribution
        case .segment, .none:
            break
        }
        child.progress.link = .none
        child.progress.contribution = 0
    }

    /// A subtask finished: a completed one counts as all its weight, a failed or cancelled one as the work it did.
    mutating func bank(_ child: TaskNode, completed: Bool, now: Date) {
        guard let parent = child.parent else { return }
        let weight = child.record.weight
        let final = completed ? 1 : child.progress.held(current: child.record.progress) ?? 0
        switch child.progress.link {
        case .units:
            parent.progress.unitsInFlight -= weight * child.progress.contribution
            parent.progress.own += weight * final
            if let total = parent.progress.total { parent.progress.own = min(parent.progress.own, total) }
        case .segment(let segment) where segment == parent.progress.segment:
            parent.progress.segmentDone += weight * (final - child.progress.contribution)
        case .segment, .none:
            break
        }
        child.progress.link = .none
        child.progress.contribution = final
        recompute(parent, now: now)
    }

    /// Recomputes a node's value from its own reports and its subtasks, and carries a change up to its ancestors.
    /// Costs O(depth): a report costs the same with 1 or 10,000 live tasks.
    mutating func recompute(_ start: TaskNode, now: Date) {
        var node = start
        while true {
            if node.record.status.isFinished { return }
            let previous = node.record.progress
            let held = node.progress.held(current: previous)
            let next = held.map { min(ProgressState.unfinishedCap, $0) }
            let value = held ?? 0
            if next == previous, value == node.progress.contribution { return }
            if next != previous {
                node.record.progress = next
                node.record.updatedAt = now
                var columns: TaskColumns = [.progress, .updatedAt]
                if let next, node.isExecuting, node.rate.isDue(at: now), !node.isEffectivelyPaused,
                    node.rate.sample(next, at: now)
                {
                    node.record.rate = node.rate.rate
                    columns.insert(.rate)
                }
                markDirty(node, columns)
            }
            guard let parent = node.parent, Self.moveContribution(of: node, to: value, in: parent) else { return }
            node = parent
        }
    }

    /// Moves what `node` adds to its parent's progress to `value` × its weight (in the parent's declared total, or in
    /// its segment); `false` when it does not count there (pushed before the parent's last own report, or banked).
    static func moveContribution(of node: TaskNode, to value: Double, in parent: TaskNode) -> Bool {
        switch node.progress.link {
        case .units:
            parent.progress.unitsInFlight += node.record.weight * (value - node.progress.contribution)
        case .segment(let segment) where segment == parent.progress.segment:
            parent.progress.segmentDone += node.record.weight * (value - node.progress.contribution)
        case .segment, .none:
            return false
        }
        node.progress.contribution = value
        return true
    }
}
