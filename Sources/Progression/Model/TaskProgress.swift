/// A progress report: a named step, a fraction, step *n* of *m*, or a name with one of the two.
///
/// ```swift
/// try await context.report(.named("Downloading"))          // a step name; progress unchanged
/// try await context.report(.progress(0.5))                 // half done
/// try await context.report(.step(3, of: 10))               // 3 of 10 steps done: 0.3
/// try await context.report(.named("Step 3").progress(0.75))
/// ```
public struct TaskProgress: Sendable, Hashable {
    /// The step's name; `nil` keeps the current one.
    public var name: String?
    /// The fraction done; `nil` keeps the current one. Derived from the steps for `.step(n, of: m)`.
    public var fraction: Double? {
        if let stepsDone, let stepCount { return stepCount > 0 ? Double(stepsDone) / Double(stepCount) : .nan }
        return explicitFraction
    }
    /// Steps done, for `.step(n, of: m)`.
    public private(set) var stepsDone: Int?
    /// The number of steps, for `.step(n, of: m)`: each child pushed during a step gets a 1/m share of the task.
    public private(set) var stepCount: Int?
    private var explicitFraction: Double?

    public init(name: String? = nil, fraction: Double? = nil) {
        self.name = name
        explicitFraction = fraction
    }

    public static func named(_ name: String) -> TaskProgress { TaskProgress(name: name) }

    public static func progress(_ fraction: Double) -> TaskProgress { TaskProgress(fraction: fraction) }

    /// `completed` of `total` steps done. `total` must be positive and `completed` within `0...total`.
    public static func step(_ completed: Int, of total: Int) -> TaskProgress {
        TaskProgress().step(completed, of: total)
    }

    /// Adds a fraction to a report.
    public func progress(_ fraction: Double) -> TaskProgress {
        var copy = self
        copy.explicitFraction = fraction
        copy.stepsDone = nil
        copy.stepCount = nil
        return copy
    }

    /// Adds step *n* of *m* to a report.
    public func step(_ completed: Int, of total: Int) -> TaskProgress {
        var copy = self
        copy.explicitFraction = nil
        copy.stepsDone = completed
        copy.stepCount = total
        return copy
    }

    /// Adds a name to a report.
    public func named(_ name: String) -> TaskProgress {
        var copy = self
        copy.name = name
        return copy
    }

    /// Checks the values: a fraction must be finite and within 0...1; a step count positive with n within 0...m.
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
        if let fraction {
            guard fraction.isFinite, fraction >= 0, fraction <= 1 else {
                throw ProgressionError.invalidProgressValue("\(fraction) is not a fraction in 0...1")
            }
        }
    }
}
