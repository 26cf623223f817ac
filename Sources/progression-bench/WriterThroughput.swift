import Foundation
import Progression

/// Rows per second of the store's batched snapshot write, `SQLiteTaskStore.apply(TaskBatch(progress: …))`, against a
/// raw prepared UPDATE loop (``RawSQLiteUpdater``) on the same file, table, rows and batch size, in the same regime.
///
/// The trials alternate store → raw → raw with the store's own SQL (a diagnostic that separates the cost of the
/// statement from the cost of the Swift layers), rotating which goes first; the ratio is the median of per-trial
/// ratios.
enum WriterThroughput {
    static let owner = "bench-owner"
    /// The statement a hand-written writer would run.
    static let rawSQL = "UPDATE tasks SET progress = ?1, step = ?2, updated_at = ?3 WHERE id = ?4"
    /// The statement ``SQLiteTaskStore/apply(_:)`` runs for a progress record (with its owner guard).
    static let storeSQL =
        "UPDATE tasks SET progress = ?, step = ?, updated_at = ? WHERE id = ? AND (?5 IS NULL OR owner_id IS ?5)"

    static let scenario = Scenario(
        name: "writer",
        keys: ["ratio_writer_vs_raw_sqlite", "writer_rows_per_s", "raw_sqlite_rows_per_s", "raw_store_sql_rows_per_s"]
    ) { context in
        let sizes = context.sizes
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let path = scratch.file("writer.sqlite")
        let store = try SQLiteTaskStore(path: path)
        let ids = try await insertRows(into: store, count: sizes.writerRows)
        let raw = try RawSQLiteUpdater(path: path, sql: rawSQL)
        let rawSameSQL = try RawSQLiteUpdater(path: path, sql: storeSQL)
        let cIDs = ids.map { Array($0.utf8CString) }
        let step = "step"
        let cStep = Array(step.utf8CString)
        let cOwner = Array(owner.utf8CString)
        let batchSize = sizes.writerBatchSize
        let batchesPerTrial = sizes.writerBatchesPerTrial
        let rowsPerTrial = batchSize * batchesPerTrial
        let batchStarts = stride(from: 0, to: ids.count - batchSize + 1, by: batchSize).map { $0 }

        enum Contender: String, CaseIterable { case store, raw, rawStoreSQL }
        var rates: [Contender: [Double]] = [:]
        var ratios: [Double] = []
        var value = 0.0
        func nextProgress() -> Double {
            value = value >= 0.999 ? 0.001 : value + 0.001
            return value
        }
        // One untimed round of each warms the caches and the statement caches.
        let trials = sizes.writerTrials + 1
        for trial in 0..<trials {
            var trialRates: [Contender: Double] = [:]
            let order = Contender.allCases.rotated(by: trial)
            for contender in order {
                let elapsed: Duration
                switch contender {
                case .store:
                    // Batches are built before the clock starts: the executor's takeBatch is measured elsewhere.
                    let now = Date()
                    let batches = (0..<batchesPerTrial).map { index -> TaskBatch in
                        let start = batchStarts[index % batchStarts.count]
                        let progress = nextProgress()
                        return TaskBatch(
                            updates: ids[start..<start + batchSize].map {
                                var record = TaskRecord(id: $0, name: "", createdAt: now)
                                record.progress = progress
                                record.step = step
                                record.updatedAt = now
                                return TaskUpdate(record, columns: [.progress, .step, .updatedAt])
                            }, owner: owner)
                    }
                    (_, elapsed) = try await Measurement.time {
                        for batch in batches {
                            let result = try await store.apply(batch)
                            guard result.rejectedTaskIDs.isEmpty else {
                                throw BenchFailure("the store rejected \(result.rejectedTaskIDs.count) rows")
                            }
                        }
                    }
                case .raw, .rawStoreSQL:
                    let updater = contender == .raw ? raw : rawSameSQL
                    let updatedAt = Int64(Date().timeIntervalSince1970 * 1000)
                    let progresses = (0..<batchesPerTrial).map { _ in nextProgress() }
                    (_, elapsed) = try await Measurement.time {
                        for index in 0..<batchesPerTrial {
                            let start = batchStarts[index % batchStarts.count]
                            try updater.update(
                                ids: cIDs[start..<start + batchSize], progress: progresses[index], step: cStep,
                                updatedAt: updatedAt, owner: cOwner)
                        }
                    }
                }
                trialRates[contender] = Double(rowsPerTrial) / elapsed.inSeconds
            }
            guard trial > 0 else { continue }
            for (contender, rate) in trialRates { rates[contender, default: []].append(rate) }
            ratios.append(trialRates[.store]! / trialRates[.raw]!)
            context.log(
                "writer trial \(trial): store \(FigureFormat.number(trialRates[.store]!)) rows/s, raw "
                    + "\(FigureFormat.number(trialRates[.raw]!)), raw with the store's SQL "
                    + "\(FigureFormat.number(trialRates[.rawStoreSQL]!))")
        }
        await store.close()
        let shape = "\(batchSize) rows per transaction, \(FigureFormat.number(Double(ids.count))) rows"
        return [
            Figure(
                "ratio_writer_vs_raw_sqlite", Measurement.median(ratios), unit: "ratio", target: .atLeast(0.5),
                note: "store.apply ÷ raw UPDATE loop, median of \(ratios.count) trials"),
            Figure(
                "writer_rows_per_s", Measurement.median(rates[.store] ?? []), unit: "rows/s",
                note: "SQLiteTaskStore.apply(TaskBatch(progress:)), \(shape)"),
            Figure(
                "raw_sqlite_rows_per_s", Measurement.median(rates[.raw] ?? []), unit: "rows/s",
                note: "raw prepared UPDATE … WHERE id = ?, WAL, NORMAL, \(shape)"),
            Figure(
                "raw_store_sql_rows_per_s", Measurement.median(rates[.rawStoreSQL] ?? []), unit: "rows/s",
                note: "raw loop running the store's own UPDATE (owner guard): diagnostic"),
        ]
    }

    /// Inserts `count` running roots held by ``owner`` and returns their ids.
    static func insertRows(into store: SQLiteTaskStore, count: Int) async throws -> [String] {
        let now = Date()
        let ids = (0..<count).map { _ in UUID().uuidString.lowercased() }
        for start in stride(from: 0, to: count, by: 1_000) {
            let records = ids[start..<min(count, start + 1_000)].map {
                TaskRecord(id: $0, name: "row", status: .running, ownerID: owner, createdAt: now, startedAt: now)
            }
            try await store.insert(records, events: [])
        }
        return ids
    }
}

extension Array {
    /// The array rotated left by `offset` places.
    func rotated(by offset: Int) -> [Element] {
        guard !isEmpty else { return self }
        let shift = offset % count
        return Array(self[shift...] + self[..<shift])
    }
}
