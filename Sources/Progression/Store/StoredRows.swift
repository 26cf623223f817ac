import Foundation

// What the SQL stores (SQLite's and PostgreSQL's) do alike with the rows they read, so that both read them one way.

extension TaskQuery {
    /// The ORDER BY clause of a root listing, in SQL both stores accept.
    package var orderClause: String {
        let direction = reverse ? "ASC" : "DESC"
        return switch sort {
        case .created: "created_at \(direction), id \(direction)"
        case .updated: "updated_at \(direction), id \(direction)"
        case .progress: "coalesce(progress, -1) \(direction), created_at \(direction), id \(direction)"
        }
    }
}

extension EventQuery {
    /// Where a history read starts: after the `after` cursor, or from the end for a tail.
    package var firstCursor: Int64 { tail ? Int64.max : (after ?? 0) }

    /// How many rows a page of history reads: the events of a subtree are filtered out of its root's history.
    package var pageSize: Int { max(limit, 64) }

    /// Adds one page of a root's history (in read order) to `events`, keeping those of `ids` (every node when `nil`)
    /// and, for a tail, those after `after`; moves `cursor` past the page. Returns whether to read another page.
    package func collect(
        _ page: [TaskEvent], into events: inout [TaskEvent], ids: Set<String>?, cursor: inout Int64
    ) -> Bool {
        guard let last = page.last, events.count < limit else { return false }
        cursor = last.sequence ?? cursor
        for event in page where ids?.contains(event.taskID) ?? true {
            if tail, let after, let sequence = event.sequence, sequence <= after { continue }
            events.append(event)
            if events.count == limit { return false }
        }
        return page.count == pageSize
    }
}

extension TaskOptions {
    /// The registered job kinds as stored (name, options as JSON), decoded.
    ///
    /// - Throws: ``TaskStoreError`` (`corrupt`, naming `location`) for options that do not decode.
    package static func decodeKinds(
        _ rows: [(name: String, options: String)], decoder: JSONDecoder, location: String
    ) throws -> [String: TaskOptions] {
        var kinds: [String: TaskOptions] = [:]
        for (name, options) in rows {
            do {
                kinds[name] = try decoder.decode(TaskOptions.self, from: Data(options.utf8))
            } catch {
                throw TaskStoreError(
                    .corrupt, path: location, message: "job kind '\(name)' cannot be read: its options do not decode")
            }
        }
        return kinds
    }
}

extension TaskUpdate {
    /// What a change of a task does to its descendants, written with it: a cancellation cancels the unfinished ones;
    /// running a job now ends the durable sleeps it waits in (their wake time becomes now).
    package static func cascade(
        of transition: TaskLifecycle.Transition, over descendants: some Sequence<TaskRecord>, at now: Date
    ) throws(ProgressionError) -> [TaskUpdate] {
        switch transition {
        case .cancel:
            return try cancelling(descendants, at: now)
        case .runNow:
            var updates: [TaskUpdate] = []
            for var node in descendants where !node.status.isFinished && node.nextAttemptAt.map({ $0 > now }) == true {
                node.nextAttemptAt = now
                node.updatedAt = now
                updates.append(TaskUpdate(node, columns: [.nextAttemptAt, .updatedAt]))
            }
            return updates
        default:
            return []
        }
    }

    /// The updates that cancel the unfinished nodes of `descendants` with their cancelled root, by the system: their
    /// cancellation is implied by the root's one event, so none of them writes its own.
    package static func cancelling(
        _ descendants: some Sequence<TaskRecord>, at now: Date
    ) throws(ProgressionError) -> [TaskUpdate] {
        var updates: [TaskUpdate] = []
        for var node in descendants where !node.status.isFinished {
            let old = node
            try TaskLifecycle.apply(.cancel, to: &node, now: now, by: .system)
            updates.append(TaskUpdate(node, columns: TaskColumns.changed(from: old, to: node)))
        }
        return updates
    }
}
