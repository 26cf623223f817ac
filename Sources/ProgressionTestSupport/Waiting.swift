import Progression

/// Polls `condition` every `interval` until it holds; throws after `timeout`. Not a sleep used as synchronisation: it
/// waits for a state, with a deadline.
///
/// ```swift
/// try await poll("the service to start") { service.stderr.contains("serving checksum jobs") }
/// ```
///
/// A store's transient error (``TaskStoreError/isTransient``: the server did not answer in time, a connection could
/// not be made) in `condition` means "not known yet": the poll goes on, and says so if it times out. A loaded
/// machine's test reads of a live server fail that way now and then; what the test waits for has not failed.
///
/// - Throws: ``TestFailure`` ("timed out waiting for `what`") once `timeout` has passed without `condition` holding,
///   or what `condition` throws but a transient store error.
public func poll(
    _ what: String, timeout: Duration = .seconds(120), every interval: Duration = .milliseconds(20),
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    var transient: TaskStoreError?
    while true {
        do {
            if try await condition() { return }
            transient = nil
        } catch let error as TaskStoreError where error.isTransient {
            transient = error
        }
        guard ContinuousClock.now < deadline else {
            throw transient.map { TestFailure("timed out waiting for \(what) (the store's last error: \($0))") }
                ?? TestFailure.timedOut(waitingFor: what)
        }
        try await Task.sleep(for: interval)
    }
}

/// Polls a count every `interval` until it reaches `target`; fails only when the count has not grown for `stillFor`.
/// For work whose total time depends on the machine's throughput (hundreds of jobs on a loaded machine): the deadline
/// is on progress stopping, not on the whole taking a fixed time.
public func poll(
    _ what: String, until target: Int, stillFor: Duration = .seconds(120), every interval: Duration = .milliseconds(50),
    _ count: () async throws -> Int
) async throws {
    var best = -1
    var movedAt = ContinuousClock.now
    while true {
        let now: Int
        do {
            now = try await count()
        } catch let error as TaskStoreError where error.isTransient {
            now = best
        }
        if now >= target { return }
        if now > best {
            best = now
            movedAt = ContinuousClock.now
        }
        guard ContinuousClock.now - movedAt < stillFor else {
            throw TestFailure("timed out waiting for \(what): \(max(0, best)) of \(target), none more for \(stillFor)")
        }
        try await Task.sleep(for: interval)
    }
}

/// Polls `condition` every `interval` until it holds or `timeout` passes; returns whether it held, for an `#expect`
/// that lets the test go on when it does not.
///
/// ```swift
/// #expect(await eventually { watch.stdout.contains("w1 running 10%") }, "\(watch.stdout)")
/// ```
///
/// - Throws: What `condition` throws.
public func eventually(
    timeout: Duration = .seconds(120), every interval: Duration = .milliseconds(20),
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return try await condition()
}

/// Runs `body`, failing after `limit` even when `body` is stuck on something that ignores cancellation (the race is
/// between two unstructured tasks, so the caller never waits for a stuck one): a hang becomes a named test failure
/// instead of a test run that never ends. At the deadline `body`'s task is cancelled.
///
/// ```swift
/// let status = try await within(.seconds(30), "the closure task on the stream") { await firstStatus(of: id) }
/// ```
///
/// - Throws: ``TestFailure`` ("timed out waiting for `what`") after `limit`, or what `body` throws.
public func within<T: Sendable>(
    _ limit: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let work = Task<Result<T, any Error>, Never> { await Result(catching: body) }
    return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let once = OneShot(continuation)
        let timer = Task {
            try? await Task.sleep(for: limit)
            guard !Task.isCancelled else { return }
            work.cancel()
            once.finish(.failure(TestFailure.timedOut(waitingFor: what)))
        }
        Task {
            once.finish(await work.value)
            timer.cancel()
        }
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
