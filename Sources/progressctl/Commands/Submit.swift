import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// Queues jobs for an executor that registered their kind.
    struct Submit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Submit a job (a pending root of a registered kind with a JSON input), or many from JSON lines. Prints the ids.",
            discussion: """
                The next worker that registered the kind and has a free slot runs it, with the options the kind was \
                registered with; --retryable, --pausable and --priority go over them. A kind that no worker ever \
                registered on the database is refused (a typo would otherwise wait for ever): --allow-unregistered \
                queues it for workers that start later. A kind that no running worker registered is accepted with \
                a warning. With an idempotency key that a job of the same kind already has, \
                nothing is written and that job's id is printed. --at TIME or --delay DURATION make a delayed job: \
                it waits, holding no slot, listed as scheduled, until then. --stall-limit DURATION shows the job \
                as stalled once nothing in it moved for that long, and --stall-action cancel or retry has its \
                worker cancel it or fail the attempt then (flag, the default, only shows it).

                --after ID (repeatable; a unique prefix, or ROOT/NAME of a link for its child job) makes a job that \
                runs after others: it waits, holding no slot, listed as waiting, until every one of them finished, \
                then runs on any worker. --if-dependency-fails cancel (the default) cancels it when one of them \
                fails or is cancelled; run runs it all the same. An id that names no job (unknown, a subtask) is \
                refused and nothing is written.

                --from FILE (or - for stdin) reads one job per line, as a JSON object:
                  {"kind": "import", "input": {"file": "a.csv"}, "idempotencyKey": "a.csv", "priority": 5}
                "input" (any JSON) is required; "kind" too unless KIND is given for every line; "name" and \
                "idempotencyKey" (strings), "priority" (an integer), "retryable" and "pausable" (true or false), \
                "runAt" (an ISO-8601 time), "after" (an id or an array of ids) and "ifDependencyFails" ("cancel" or \
                "run") are optional and go over the command line's. Blank lines are skipped; any \
                other field is an error. All the jobs are written in one transaction: a line that is not such an \
                object is reported with its number and nothing is written. The ids are printed one per line, in the \
                order of the lines.

                Examples:
                  progressctl submit import --input '{"file": "a.csv"}' --name "import a.csv"
                  progressctl submit import --input '{"file": "a.csv"}' --idempotency-key a.csv --retryable --priority 5
                  progressctl submit report --input '{}' --at 2026-11-26T03:00:00Z
                  progressctl submit reminder --input '{"user": 7}' --delay 10m
                  progressctl submit import --input '{"file": "a.csv"}' --stall-limit 5m --stall-action retry
                  progressctl submit report --input '{}' --after 3xjggyz2 --after 4ab7k2m1 --if-dependency-fails run
                  progressctl submit --from jobs.jsonl
                  ls *.csv | jq -R -c '{input: {file: .}, idempotencyKey: .}' | progressctl submit import --from -
                """)

        @OptionGroup var options: GlobalOptions

        @Argument(help: "The job kind, as the executor registered it (with --from: of the lines without a kind).")
        var kind: String?

        @Option(name: .long, help: ArgumentHelp("The job's input, as JSON.", valueName: "json"))
        var input: String?

        @Option(name: .long, help: ArgumentHelp("Read jobs from a file of JSON lines (- for stdin) and submit them at once.", valueName: "file"))
        var from: String?

        @Option(name: .long, help: "The task id (default: a new short id, as the library gives).")
        var id: String?

        @Option(name: .long, help: ArgumentHelp("What the job is called in list, show and watch (default: the kind).", valueName: "name"))
        var name: String?

        @Option(name: .long, help: ArgumentHelp("Run it no earlier than this time (ISO 8601, e.g. 2026-11-26T03:00:00Z, or local 2026-11-26 03:00).", valueName: "time"))
        var at: String?

        @Option(name: .long, help: ArgumentHelp("Run it no earlier than this long from now (90s, 10m, 2h, 1d).", valueName: "duration"))
        var delay: String?

        @Flag(name: .customLong("allow-unregistered"), help: "Queue jobs of a kind that no worker registered yet on this database (for workers that start later).")
        var allowUnregistered = false

        @Option(name: .long, parsing: .unconditional, help: "Higher runs first (default: the kind's).")
        var priority: Int?

        @Option(name: .customLong("idempotency-key"), help: ArgumentHelp("Submit at most once per kind with this key.", valueName: "key"))
        var idempotencyKey: String?

        @Flag(inversion: .prefixedNo, help: "Whether the job may be retried after it failed or was cancelled (default: the kind's).")
        var retryable: Bool?

        @Flag(inversion: .prefixedNo, help: "Whether the job may be paused (default: the kind's).")
        var pausable: Bool?

        @Option(name: .long, help: ArgumentHelp("Run it after this job has finished (repeat for more; a unique prefix is enough).", valueName: "id"))
        var after: [String] = []

        @Option(name: .customLong("stall-limit"), help: ArgumentHelp("Show the job as stalled once nothing in it moved for this long (30s, 5m, 2h; default: the kind's).", valueName: "duration"))
        var stallLimit: String?

        @Option(name: .customLong("stall-action"), help: ArgumentHelp("What its worker does once it is stalled: flag (the default), cancel or retry.", valueName: "flag|cancel|retry"))
        var stallAction: String?

        @Option(name: .customLong("if-dependency-fails"), help: ArgumentHelp("What the job does when a job of --after fails or is cancelled: cancel (the default) or run.", valueName: "cancel|run"))
        var ifDependencyFails: String?

        /// `submit --json`: one object; with `--from`, an array of them in the order of the lines.
        struct SubmitJSON: Encodable {
            var id: String
            /// `false` when a job with the idempotency key existed.
            var created: Bool
            /// The line of `--from` (`null` without it).
            @Null var line: Int?
        }

        func validate() throws {
            if at != nil, delay != nil { throw ValidationError("give --at or --delay, not both") }
            if stallAction != nil, stallLimit == nil { throw ValidationError("--stall-action goes with --stall-limit") }
            if at != nil || delay != nil, !after.isEmpty {
                throw ValidationError("give --at or --delay, or --after: a job waits for a time or for other jobs, not both")
            }
            if from != nil {
                if name != nil { throw ValidationError("--name goes with one job; with --from give \"name\" per line") }
                if input != nil { throw ValidationError("--input and --from exclude each other: the lines carry the inputs") }
                if id != nil { throw ValidationError("--id goes with one job, not with --from") }
                if idempotencyKey != nil { throw ValidationError("--idempotency-key goes with one job; with --from give \"idempotencyKey\" per line") }
            } else {
                if kind == nil { throw ValidationError("give the job kind (or --from FILE)") }
                if input == nil { throw ValidationError("give the job's input with --input JSON (or --from FILE)") }
                if ifDependencyFails != nil, after.isEmpty {
                    throw ValidationError("--if-dependency-fails goes with --after: give the jobs to run after")
                }
            }
        }

        /// `--if-dependency-fails`, checked.
        private func dependencyPolicy() throws -> DependencyFailurePolicy? {
            guard let ifDependencyFails else { return nil }
            guard let policy = DependencyFailurePolicy(rawValue: ifDependencyFails.lowercased()) else {
                throw CLIError.usage(
                    "invalid --if-dependency-fails '\(ifDependencyFails.escapedForTerminal)' (expected cancel or run)")
            }
            return policy
        }

        /// Marks `record` waiting for the jobs `ids` (``JobOptions/after``), with its `waiting` event; returns its
        /// dependencies.
        ///
        /// - Throws: ``ProgressionError/invalidArgument(_:)`` for a job with a run-at time too, or one after itself.
        static func runAfter(
            _ ids: [String], policy: DependencyFailurePolicy, record: inout TaskRecord, events: inout [TaskEvent]
        ) throws(ProgressionError) -> [JobDependency] {
            let dependencies = try JobOptions(after: ids, ifDependencyFails: policy).dependencies(of: &record)
            if let waitingFor = record.waitingFor {
                events.append(
                    TaskEvent(
                        taskID: record.id, rootID: record.id, kind: .waiting, at: record.createdAt, attempt: 1,
                        message: "for \(waitingFor)"))
            }
            return dependencies
        }

        /// Inserts jobs with their events and dependencies in one transaction; a dependency that is not a job (it was
        /// removed meanwhile) is refused as bad input, and nothing is written. Jobs that run after others are looked
        /// at at once (the tree keeper's pass): one whose dependencies had finished already is released or cancelled
        /// now, not when a worker comes.
        static func insert(
            _ records: [TaskRecord], events: [TaskEvent], dependencies: [JobDependency], store: OperatorStore
        ) async throws {
            guard !dependencies.isEmpty else {
                try await store.insert(records, events: events)
                return
            }
            do {
                try await store.insert(records, events: events, dependencies: dependencies)
            } catch let error as JobDependencyError {
                throw CLIError.usage("\(error.description); nothing was written")
            }
            await TaskControl(store: store, wait: .zero).settleJobTrees()
        }

        func run() async throws {
            if let kind, kind.isEmpty { throw CLIError.usage("the kind must not be empty") }
            _ = try dependencyPolicy()
            _ = try stallRule()  // refused before the database is opened: a bad value changes nothing
            if let from {
                try await submitLines(from: from)
            } else {
                try await submitOne()
            }
        }

        // MARK: One job

        /// The stall rule of --stall-limit and --stall-action, checked: `nil` without them.
        private func stallRule() throws -> StallRule? {
            guard let stallLimit else { return nil }
            let seconds = try InputParsing.seconds(stallLimit, option: "--stall-limit")
            let action: StallAction
            do {
                action = try stallAction.map { try StallAction(parsing: $0) } ?? .flag
            } catch {
                throw CLIError.usage(ProgressionError.describe(error))
            }
            let rule = StallRule(limit: .milliseconds(Int64((seconds * 1000).rounded())), action: action)
            do {
                try rule.check()
            } catch {
                throw CLIError.usage(ProgressionError.describe(error))
            }
            return rule
        }

        /// When the job may run, from --at or --delay: `nil` for at once.
        private func runAt(now: Date) throws -> Date? {
            if let at {
                let date = try InputParsing.at(at, option: "--at")
                return date > now ? date : nil
            }
            if let delay {
                let seconds = try InputParsing.seconds(delay, option: "--delay")
                return seconds > 0 ? now.addingTimeInterval(seconds) : nil
            }
            return nil
        }

        /// Refuses kinds that no worker ever registered on this database (a typo would otherwise wait for ever),
        /// unless --allow-unregistered; warns when no running worker registered a kind (its jobs wait for one).
        private func checkKinds(_ kinds: Set<String>, store: OperatorStore) async throws {
            let owners = try await store.checked { try await $0.owners() }
            let live = owners.filter { $0.liveness().isAlive }
            let running = Set(live.flatMap { $0.kinds ?? [] })
            let known = Set(try await store.checked { try await $0.registeredKinds() }.keys).union(running)
            for kind in kinds.sorted() where !running.contains(kind) {
                // Owners of an older version record no kinds: nothing can be said of them.
                if live.contains(where: { $0.kinds == nil }) { continue }
                if allowUnregistered { continue }
                if known.contains(kind) {
                    Terminal.standardError(
                        "progressctl: warning: no running worker runs '\(kind)' jobs now; they wait until one starts")
                    continue
                }
                let suggestion = known.sorted().min { Self.distance($0, kind) < Self.distance($1, kind) }
                    .flatMap { Self.distance($0, kind) <= max(2, kind.count / 3) ? " (did you mean '\($0)'?)" : nil } ?? ""
                throw CLIError.usage(
                    "no worker registered the job kind '\(kind)'\(suggestion); "
                        + (known.isEmpty ? "none registered any kind yet" : "known kinds: \(known.sorted().joined(separator: ", "))")
                        + ". Give --allow-unregistered to queue it for workers that start later")
            }
        }

        /// The edit distance of two names (for a suggestion).
        static func distance(_ left: String, _ right: String) -> Int {
            let a = Array(left), b = Array(right)
            var previous = Array(0...b.count)
            for (i, x) in a.enumerated() {
                var current = [i + 1]
                for (j, y) in b.enumerated() {
                    current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
                }
                previous = current
            }
            return previous[b.count]
        }

        private func submitOne() async throws {
            let kind = kind ?? ""
            if let name, name.isEmpty { throw CLIError.usage("--name must not be empty") }
            let data = Data((input ?? "").utf8)
            do {
                _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
            } catch {
                throw CLIError.usage("--input is not valid JSON: \((error as NSError).userInfo[NSDebugDescriptionErrorKey] ?? error.localizedDescription)")
            }
            if let id, id.isEmpty { throw CLIError.usage("--id must not be empty") }
            let policy = try dependencyPolicy() ?? .cancel
            let now = Date()
            let runAt = try runAt(now: now)
            let store = try options.openStore(readOnly: false)
            var afterIDs: [String] = []
            for reference in after { afterIDs.append(try await store.resolveJob(reference).id) }
            try await checkKinds([kind], store: store)
            if let key = idempotencyKey, let existing = try await store.checked({ try await $0.root(kind: kind, idempotencyKey: key) }) {
                try report(existing.id, created: false)
                return
            }
            let taskID: String
            if let id {
                taskID = id
            } else {
                taskID = TaskIdentifier.root(try await store.checked { try await $0.reserveIdentifiers(1) }.lowerBound)
            }
            let registered = try await store.checked { try await $0.registeredKinds() }
            let taskOptions = Self.options(
                registered: registered[kind]?.options, retryable: retryable, pausable: pausable, priority: priority,
                stall: try stallRule())
            var (record, events) = Self.job(
                id: taskID, kind: kind, name: name, input: data, idempotencyKey: idempotencyKey, options: taskOptions,
                runAt: runAt, at: now)
            let dependencies: [JobDependency]
            do {
                dependencies = try Self.runAfter(afterIDs, policy: policy, record: &record, events: &events)
            } catch {
                throw CLIError.usage(error.description)
            }
            do {
                try await Self.insert([record], events: events, dependencies: dependencies, store: store)
            } catch let error as TaskStoreError where error.reason == .conflict {
                // Another submit with the same key may have won the race.
                if let key = idempotencyKey,
                    let existing = try await store.checked({ try await $0.root(kind: kind, idempotencyKey: key) })
                {
                    try report(existing.id, created: false)
                    return
                }
                throw CLIError("a task with id '\(taskID)' exists already")
            } catch let error as TaskStoreError {
                throw CLIError(store: error)
            }
            try report(taskID, created: true)
        }

        private func report(_ id: String, created: Bool) throws {
            if options.json {
                try JSONOutput.print(SubmitJSON(id: id, created: created, line: nil))
            } else {
                if !created {
                    Terminal.standardError("a job of kind '\(kind ?? "")' with idempotency key '\(idempotencyKey ?? "")' exists: \(id)")
                }
                Terminal.output(id.escapedForTerminal)
            }
        }

        // MARK: Shared

        /// A kind's registered options with what the command line (or a line of `--from`) gives over them. When no
        /// executor of this database registered the kind yet, the given fields are marked so that the executor that
        /// runs the job fills in the others from its kind.
        static func options(
            registered: TaskOptions?, retryable: Bool?, pausable: Bool?, priority: Int?, stall: StallRule? = nil
        ) -> TaskOptions {
            var given: Set<TaskOptions.Field> = []
            var options = registered ?? .default
            if let stall {
                options.stall = stall
                given.insert(.stall)
            }
            if let retryable {
                options.canRetry = retryable
                given.insert(.canRetry)
            }
            if let pausable {
                options.canPause = pausable
                given.insert(.canPause)
            }
            if let priority {
                options.priority = priority
                given.insert(.priority)
            }
            if registered == nil { options.givenFields = given }
            return options
        }

        /// A pending root job and its `created` event (and, for a delayed one, its `scheduled` event).
        static func job(
            id: String, kind: String, name: String?, input: Data, idempotencyKey: String?, options: TaskOptions,
            runAt: Date?, at now: Date
        ) -> (TaskRecord, [TaskEvent]) {
            var record = TaskRecord(
                id: id, name: name ?? kind, kind: kind, input: input, idempotencyKey: idempotencyKey, options: options,
                status: .pending, priority: options.priority, createdAt: now)
            record.nextAttemptAt = runAt?.roundedUpToMilliseconds
            var events = [
                TaskEvent(taskID: id, rootID: id, kind: .created, at: now, attempt: 1, message: "submitted by progressctl")
            ]
            if let runAt {
                events.append(
                    TaskEvent(
                        taskID: id, rootID: id, kind: .scheduled, at: now, attempt: 1,
                        message: "runs at \(runAt.formatted(.iso8601))"))
            }
            return (record, events)
        }

        // MARK: Many jobs

        private func submitLines(from source: String) async throws {
            let text = try Self.read(source)
            let jobs: [JobLine]
            switch JobLine.parse(text, defaultKind: kind) {
            case .success(let parsed): jobs = parsed
            case .failure(let errors):
                for error in errors.lines.dropLast() { Terminal.standardError("progressctl: error: \(error)") }
                throw CLIError.usage(errors.lines.last ?? "no jobs")
            }
            let store = try options.openStore(readOnly: false)
            guard !jobs.isEmpty else {
                if options.json { try JSONOutput.print([SubmitJSON]()) }
                Terminal.standardError("no jobs to submit in '\(source)'")
                return
            }
            try await checkKinds(Set(jobs.map(\.kind)), store: store)
            let registered = try await store.checked { try await $0.registeredKinds() }.mapValues(\.options)
            // A job whose key another job of the database has is not written again; nor is a second line with the
            // same kind and key. A race with another submit is lost at most twice.
            let references = try await resolveReferences(jobs, store: store)
            var attempt = 0
            while true {
                attempt += 1
                let plan = try await plan(jobs, registered: registered, references: references, store: store)
                do {
                    try await Self.insert(plan.records, events: plan.events, dependencies: plan.dependencies, store: store)
                    try report(plan.results, jobs: jobs)
                    return
                } catch let error as TaskStoreError where error.reason == .conflict && attempt < 3 {
                    continue
                } catch let error as TaskStoreError where error.reason == .conflict {
                    throw CLIError("\(error.message); another process submitted the same jobs meanwhile; nothing was written")
                } catch let error as TaskStoreError {
                    throw CLIError(store: error)
                }
            }
        }

        /// What one insert writes, and the id each line gets.
        private struct Plan {
            var records: [TaskRecord] = []
            var events: [TaskEvent] = []
            var dependencies: [JobDependency] = []
            var results: [(id: String, created: Bool)] = []
        }

        /// The job each `--after` reference of the command line and of the lines names (by reference). Every bad one is
        /// reported, with its line, before anything is written.
        private func resolveReferences(_ jobs: [JobLine], store: OperatorStore) async throws -> [String: String] {
            var resolved: [String: String] = [:]
            var errors: [String] = []
            func resolve(_ reference: String, line: Int?) async throws {
                guard resolved[reference] == nil else { return }
                do {
                    resolved[reference] = try await store.resolveJob(reference).id
                } catch let error as CLIError where error.exitCode == 64 {
                    errors.append((line.map { "line \($0): " } ?? "--after: ") + error.message)
                }
            }
            for reference in after { try await resolve(reference, line: nil) }
            for job in jobs {
                for reference in job.after ?? [] { try await resolve(reference, line: job.line) }
            }
            guard errors.isEmpty else {
                for error in errors.dropLast() { Terminal.standardError("progressctl: error: \(error)") }
                throw CLIError.usage((errors.last ?? "") + "; nothing was written")
            }
            return resolved
        }

        /// What becomes of a line: a new job, a job of the database with its kind and key, or the same job as an
        /// earlier line with them.
        private enum Resolution {
            case new
            case stored(String)
            case sameAs(Int)
        }

        private func plan(
            _ jobs: [JobLine], registered: [String: TaskOptions], references: [String: String], store: OperatorStore
        ) async throws -> Plan {
            let stall = try stallRule()
            var resolutions: [Resolution] = []
            var firstWithKey: [String: Int] = [:]
            for (index, job) in jobs.enumerated() {
                guard let key = job.idempotencyKey else {
                    resolutions.append(.new)
                    continue
                }
                let identity = "\(job.kind)\u{0}\(key)"
                if let first = firstWithKey[identity] {
                    resolutions.append(.sameAs(first))
                } else if let stored = try await store.checked({ try await $0.root(kind: job.kind, idempotencyKey: key) }) {
                    firstWithKey[identity] = index
                    resolutions.append(.stored(stored.id))
                } else {
                    firstWithKey[identity] = index
                    resolutions.append(.new)
                }
            }
            let newCount = resolutions.filter { if case .new = $0 { true } else { false } }.count
            let identifiers = newCount == 0 ? 0..<0 : try await store.checked { try await $0.reserveIdentifiers(newCount) }
            var nextIdentifier = identifiers.lowerBound
            let now = Date()
            let commandRunAt = try runAt(now: now)
            let commandPolicy = try dependencyPolicy() ?? .cancel
            var plan = Plan()
            for (job, resolution) in zip(jobs, resolutions) {
                switch resolution {
                case .stored(let id):
                    plan.results.append((id, false))
                case .sameAs(let first):
                    plan.results.append((plan.results[first].id, false))
                case .new:
                    let id = TaskIdentifier.root(nextIdentifier)
                    nextIdentifier += 1
                    let taskOptions = Self.options(
                        registered: registered[job.kind], retryable: job.retryable ?? retryable,
                        pausable: job.pausable ?? pausable, priority: job.priority ?? priority, stall: stall)
                    let after = (job.after ?? self.after).compactMap { references[$0] }
                    let runAt = after.isEmpty ? job.runAt.map { $0 > now ? $0 : nil } ?? commandRunAt : nil
                    if !after.isEmpty, job.runAt != nil || commandRunAt != nil {
                        throw CLIError.usage(
                            "line \(job.line): a job waits for a time (runAt, --at, --delay) or for other jobs (after, --after), not both")
                    }
                    var (record, events) = Self.job(
                        id: id, kind: job.kind, name: job.name, input: job.input, idempotencyKey: job.idempotencyKey,
                        options: taskOptions, runAt: runAt, at: now)
                    do {
                        plan.dependencies += try Self.runAfter(
                            after, policy: job.ifDependencyFails ?? commandPolicy, record: &record, events: &events)
                    } catch {
                        throw CLIError.usage("line \(job.line): \(error.description)")
                    }
                    plan.records.append(record)
                    plan.events += events
                    plan.results.append((id, true))
                }
            }
            return plan
        }

        private func report(_ results: [(id: String, created: Bool)], jobs: [JobLine]) throws {
            if options.json {
                try JSONOutput.print(
                    zip(results, jobs).map { SubmitJSON(id: $0.0.id, created: $0.0.created, line: $0.1.line) })
                return
            }
            Terminal.write(results.map { $0.id.escapedForTerminal + "\n" }.joined())
            let existing = results.filter { !$0.created }.count
            if existing > 0 {
                Terminal.standardError(
                    "\(Format.count(existing)) of \(Format.count(results.count)) jobs existed with their idempotency keys: their ids are printed, nothing new was written for them")
            }
        }

        /// The text of `source`: a file, or stdin for `-`.
        static func read(_ source: String) throws -> String {
            let data: Data
            if source == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                guard let contents = FileManager.default.contents(atPath: source) else {
                    throw CLIError("cannot read '\(source)'")
                }
                data = contents
            }
            guard let text = String(data: data, encoding: .utf8) else {
                throw CLIError.usage("'\(source)' is not UTF-8 text")
            }
            return text
        }
    }
}

/// One line of `submit --from`: `{"kind": …, "input": …, "idempotencyKey": …, "priority": …, "retryable": …,
/// "pausable": …}`.
struct JobLine {
    /// The line's number in the file, from 1.
    var line: Int
    var kind: String
    /// The input as compact JSON, keys sorted.
    var input: Data
    var name: String?
    var idempotencyKey: String?
    var priority: Int?
    var retryable: Bool?
    var pausable: Bool?
    /// When it may run (`runAt`, ISO 8601).
    var runAt: Date?
    /// The jobs it runs after (`after`: an id or an array of ids, prefixes allowed), `nil` when the line gives none.
    var after: [String]?
    /// What it does when one of them fails (`ifDependencyFails`).
    var ifDependencyFails: DependencyFailurePolicy?

    static let fields = [
        "kind", "input", "name", "idempotencyKey", "priority", "retryable", "pausable", "runAt", "after",
        "ifDependencyFails",
    ]

    /// Every bad line, as `line 3: …`.
    struct Errors: Error {
        var lines: [String]
    }

    /// The jobs of `text`, one per non-blank line, or every line's error.
    static func parse(_ text: String, defaultKind: String?) -> Result<[JobLine], Errors> {
        var jobs: [JobLine] = []
        var errors: [String] = []
        for (offset, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !line.isEmpty else { continue }
            switch parse(line, number: offset + 1, defaultKind: defaultKind) {
            case .success(let job): jobs.append(job)
            case .failure(let error): errors.append("line \(offset + 1): \(error.lines.joined(separator: "; "))")
            }
        }
        return errors.isEmpty ? .success(jobs) : .failure(Errors(lines: errors))
    }

    private static func parse(_ line: String, number: Int, defaultKind: String?) -> Result<JobLine, Errors> {
        guard let value = JSONValue(data: Data(line.utf8)), case .object(let object) = value else {
            return .failure(Errors(lines: ["not a JSON object (expected e.g. {\"kind\": \"import\", \"input\": {…}})"]))
        }
        var problems: [String] = []
        for key in object.keys.sorted() where !fields.contains(key) {
            problems.append("unknown field '\(key)' (expected \(fields.joined(separator: ", ")))")
        }
        var kind = defaultKind
        switch object["kind"] {
        case nil, .null: break
        case .string(let text) where !text.isEmpty: kind = text
        default: problems.append("\"kind\" must be a non-empty string")
        }
        if kind == nil { problems.append("no \"kind\" (give it on the line, or KIND for every line)") }
        var input = Data()
        if let value = object["input"] {
            input = value.compactData
        } else {
            problems.append("no \"input\" (give the job's input as JSON; null for none)")
        }
        var name: String?
        switch object["name"] {
        case nil, .null: break
        case .string(let text) where !text.isEmpty: name = text
        default: problems.append("\"name\" must be a non-empty string")
        }
        var runAt: Date?
        switch object["runAt"] {
        case nil, .null: break
        case .string(let text):
            if let date = ISO8601DateFormatter().date(from: text), date <= JobOptions.latestRunAt {
                runAt = date
            } else {
                problems.append("\"runAt\" must be an ISO-8601 time such as 2026-11-26T03:00:00Z")
            }
        default: problems.append("\"runAt\" must be an ISO-8601 time such as 2026-11-26T03:00:00Z")
        }
        var key: String?
        switch object["idempotencyKey"] {
        case nil, .null: break
        case .string(let text) where !text.isEmpty: key = text
        default: problems.append("\"idempotencyKey\" must be a non-empty string")
        }
        var priority: Int?
        switch object["priority"] {
        case nil, .null: break
        case .integer(let number) where Int(exactly: number) != nil: priority = Int(number)
        default: problems.append("\"priority\" must be an integer")
        }
        func flag(_ name: String) -> Bool? {
            switch object[name] {
            case nil, .null: return nil
            case .bool(let value): return value
            default:
                problems.append("\"\(name)\" must be true or false")
                return nil
            }
        }
        let retryable = flag("retryable")
        let pausable = flag("pausable")
        var after: [String]?
        switch object["after"] {
        case nil, .null: break
        case .string(let id) where !id.isEmpty: after = [id]
        case .array(let values):
            let ids = values.compactMap { value -> String? in
                if case .string(let id) = value, !id.isEmpty { return id }
                return nil
            }
            if ids.count == values.count {
                after = ids
            } else {
                problems.append("\"after\" must be a job id or an array of job ids")
            }
        default: problems.append("\"after\" must be a job id or an array of job ids")
        }
        var policy: DependencyFailurePolicy?
        switch object["ifDependencyFails"] {
        case nil, .null: break
        case .string(let text) where DependencyFailurePolicy(rawValue: text) != nil:
            policy = DependencyFailurePolicy(rawValue: text)
        default: problems.append("\"ifDependencyFails\" must be \"cancel\" or \"run\"")
        }
        guard problems.isEmpty, let kind else { return .failure(Errors(lines: problems)) }
        return .success(
            JobLine(
                line: number, kind: kind, input: input, name: name, idempotencyKey: key, priority: priority,
                retryable: retryable, pausable: pausable, runAt: runAt, after: after, ifDependencyFails: policy))
    }
}
