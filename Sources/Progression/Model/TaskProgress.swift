/// A progress report: a step name, a fraction, step *n* of *m*, a declared total of work units and the units done, or
/// a name with one of those.
///
/// ```swift
/// try await context.report(.named("Downloading"))          // a step name; progress unchanged
/// try await context.report(.progress(0.5))                 // half done
/// try await context.report(.step(3, of: 10))               // 3 of 10 steps done: 0.3
/// try await context.report(.named("Step 3").progress(0.75))
/// try await context.report(.total(300_000_000))            // the task has 300 MB of work; subtasks count against it
/// try await context.report(.completed(1_000_000))          // 1 MB of it done by the task itself
/// ```
///
/// How these combine with subtasks is described in the README ("How a task's progress is computed").
public struct TaskProgress: Sendable, Hashable {
    /// The step's name; `nil` keeps the current one.
    public var name: String?
    /// The fraction done; `nil` keeps the current one. Derived from the steps for `.step(n, of: m)`, and from the units
    /// for `.completed(u, of: t)`.
    public var fraction: Double? {
        if let stepsDone, let stepCount { return stepCount > 0 ? Double(stepsDone) / Double(stepCount) : .nan }
        if let completedUnits, let total { return total > 0 ? completedUnits / total : .nan }
        return explicitFraction
    }
    /// Steps done, for `.step(n, of: m)`.
    public private(set) var stepsDone: Int?
    /// The number of steps, for `.step(n, of: m)`: subtasks pushed during a step share a 1/m part of the task.
    public private(set) var stepCount: Int?
    /// The task's whole work in units of the task's choosing (files, bytes, rows), for `.total(_:)`. Once a total is
    /// declared, a subtask's `weight` is the number of those units it stands for.
    public private(set) var total: Double?
    /// Units the task has done itself, for `.completed(_:)`: replaces what finished subtasks added.
    public private(set) var completedUnits: Double?
    private var explicitFraction: Double?

    /// A report of a name and a fraction (either may be `nil`: unchanged).
    public init(name: String? = nil, fraction: Double? = nil) {
        self.name = name
        explicitFraction = fraction
    }

    /// A step name; progress unchanged.
    public static func named(_ name: String) -> TaskProgress { TaskProgress(name: name) }

    /// A fraction of the task done, in 0...1.
    public static func progress(_ fraction: Double) -> TaskProgress { TaskProgress(fraction: fraction) }

    /// `completed` of `total` steps done. `total` must be positive and `completed` within `0...total`.
    public static func step(_ completed: Int, of total: Int) -> TaskProgress {
        TaskProgress().step(completed, of: total)
    }

    /// Declares how many units of work the task has (positive and finite). Subtasks pushed afterwards count against
    /// it with their weight, in the same units.
    public static func total(_ units: Double) -> TaskProgress {
        TaskProgress().total(units)
    }

    /// Units of the declared total the task has done itself (0 or more, at most the total).
    public static func completed(_ units: Double) -> TaskProgress {
        TaskProgress().completed(units)
    }

    /// Units done of a total, declared in one report.
    public static func completed(_ units: Double, of total: Double) -> TaskProgress {
        TaskProgress().total(total).completed(units)
    }

    /// Adds a fraction to a report.
    public func progress(_ fraction: Double) -> TaskProgress {
        var copy = self
        copy.clearAmounts()
        copy.explicitFraction = fraction
        return copy
    }

    /// Adds step *n* of *m* to a report.
    public func step(_ completed: Int, of total: Int) -> TaskProgress {
        var copy = self
        copy.clearAmounts()
        copy.stepsDone = completed
        copy.stepCount = total
        return copy
    }

    /// Adds a declared total to a report.
    public func total(_ units: Double) -> TaskProgress {
        var copy = self
        copy.explicitFraction = nil
        copy.stepsDone = nil
        copy.stepCount = nil
        copy.total = units
        return copy
    }

    /// Adds units done to a report.
    public func completed(_ units: Double) -> TaskProgress {
        var copy = self
        copy.explicitFraction = nil
        copy.stepsDone = nil
        copy.stepCount = nil
        copy.completedUnits = units
        return copy
    }

    /// Adds a name to a report.
    public func named(_ name: String) -> TaskProgress {
        var copy = self
        copy.name = name
        return copy
    }

    private mutating func clearAmounts() {
        explicitFraction = nil
        stepsDone = nil
        stepCount = nil
        total = nil
        completedUnits = nil
    }

    /// Checks the values: a fraction must be finite and within 0...1; a step count positive with n within 0...m; a
    /// total positive and finite; units done finite, not negative, and within a total given in the same report.
    ///
    /// - Throws: ``ProgressionError/invalidProgressValue(_:)``.
    public func validate() throws {
        if let stepsDone, let stepCount {
            guard stepCount > 0 else {
                throw ProgressionError.invalidProgressValue(
                    "step \(stepsDone) of \(stepCount): the step count must be positive")
            }
            guard stepsDone >= 0, stepsDone <= stepCount else {
                throw ProgressionError.invalidProgressValue("step \(stepsDone) of \(stepCount) is outside 0...\(stepCount)")
            }
        }
        if let total {
            guard total.isFinite, total > 0 else {
                throw ProgressionError.invalidProgressValue("a total of \(total) units: it must be positive and finite")
            }
        }
        if let completedUnits {
            guard completedUnits.isFinite, completedUnits >= 0 else {
                throw ProgressionError.invalidProgressValue("\(completedUnits) units done: it must be 0 or more")
            }
            if let total, completedUnits > total {
                throw ProgressionError.invalidProgressValue("\(completedUnits) units done of a total of \(total)")
            }
        }
        if let explicitFraction {
            guard explicitFraction.isFinite, explicitFraction >= 0, explicitFraction <= 1 else {
                throw ProgressionError.invalidProgressValue("\(explicitFraction) is not a fraction in 0...1")
            }
        }
    }
}
