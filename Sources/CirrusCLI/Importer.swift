import CirrusKit
import CirrusModel
import Foundation

/// How an import is going.
package struct ImportProgress: Sendable {
    package var rowsDone: Int
    package var rowsTotal: Int
    package var elapsed: Double
    /// Rows per second in this run (rows done before a resume not counted).
    package var rowsPerSecond: Double
}

/// What an import did.
package struct ImportSummary: Sendable {
    /// Good rows in the file.
    package var rows: Int
    /// Records the server saved (over this run and the runs it resumed).
    package var saved: Int
    /// Rows the server refused, with its error.
    package var failed: [BadRow]
    /// Rows that could not be read (`--on-error skip`).
    package var skipped: [BadRow]
    package var batches: Int
    /// Batches finished by re-attaching to their long-lived operation after a restart.
    package var reattached: Int
    /// Batches sent again (their operation never reached the server or had been acknowledged).
    package var resent: Int
    package var elapsed: Double
    /// Rows saved per second by this run.
    package var rowsPerSecond: Double
    package var importID: String
}

/// `cirrus import`: sends the rows of a file as long-lived `CKModifyRecordsOperation`s of up
/// to 400 records, several in flight, and finishes an interrupted import on `--resume`.
///
/// Exactly once by construction: every row has a fixed record name (the `--id-field` value,
/// `$recordName`, or `<importID>-<line>` with the import ID kept in the state file), batches
/// are cut the same way on every run, and records are saved with `.allKeys`, so sending a
/// batch again writes the same records with the same values — never a second copy. The state
/// file holds, per batch, each operation ID before the operation is sent, and whether its
/// result arrived. On resume a batch with a result is skipped; one with an operation ID is
/// re-attached with `fetchLongLivedOperation` (the server replays its callbacks and result
/// without running it again); when the server does not know that ID (`unknownItem`: it never
/// arrived, or its result was delivered and acknowledged just before the kill, or it expired)
/// the batch is sent again under a new ID, which is harmless for the reason above.
package final class Importer: Sendable {
    let container: CKContainer
    let database: CKDatabase
    /// Batches in flight.
    let parallel: Int
    /// Whole-operation attempts per batch when the error is transient.
    let maximumAttempts = 5

    package init(container: CKContainer, database: CKDatabase, parallel: Int) {
        self.container = container
        self.database = database
        self.parallel = max(1, parallel)
    }

    /// Imports `inputPath`.
    ///
    /// - Parameters:
    ///   - options: how to read the file; nil on resume = as the state file says (given on
    ///     resume, they must match it).
    ///   - resume: finish the import the state file describes.
    ///   - restart: forget an unfinished import of this file and start again.
    /// - throws: `CLIError` with its exit code.
    package func run(
        inputPath: String,
        options requested: ImportOptions?,
        statePath: String?,
        resume: Bool,
        restart: Bool,
        progress: (@Sendable (ImportProgress) -> Void)? = nil
    ) async throws(CLIError) -> ImportSummary {
        let statePath = statePath ?? ImportState.defaultPath(for: inputPath)
        let attributes: [FileAttributeKey: Any]
        let text: String
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: inputPath)
            text = try String(contentsOfFile: inputPath, encoding: .utf8)
        } catch {
            throw CLIError.usage("cannot read \(inputPath): \((error as NSError).localizedDescription)")
        }
        let size = (attributes[.size] as? NSNumber)?.uint64Value ?? 0
        let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0

        var state: ImportState
        if resume {
            state = try ImportState.load(from: statePath)
            guard state.inputSize == size, state.inputModified == modified else {
                throw CLIError.usage("\(inputPath) changed since the import began (size or time differ); it cannot be resumed")
            }
            if let requested, requested != state.options {
                throw CLIError.usage("the options differ from the interrupted import's; resume with the same options or none")
            }
        } else {
            if FileManager.default.fileExists(atPath: statePath) {
                guard restart else {
                    throw CLIError.usage(
                        "an unfinished import of \(inputPath) exists (\(statePath)); run with --resume to finish it or --restart to start over")
                }
                try? FileManager.default.removeItem(atPath: statePath)
            }
            guard let requested else { throw CLIError.usage("no import options") }
            state = ImportState(
                importID: "i" + UUID().uuidString.prefix(8).lowercased(), inputPath: inputPath, inputSize: size,
                inputModified: modified, options: requested)
        }
        let options = state.options
        let source = ImportSource(
            text: text, options: options, importID: state.importID,
            baseDirectory: URL(fileURLWithPath: inputPath).deletingLastPathComponent())
        if let first = source.badRows.first, options.onError != "skip" {
            let more = source.badRows.count > 1 ? " (and \(source.badRows.count - 1) more bad rows)" : ""
            throw CLIError(.badInput, "\(inputPath): \(first)\(more); nothing was imported")
        }
        try state.save(to: statePath)
        let store = ImportStateStore(state: state, path: statePath)

        if options.zoneName != CKRecordZone.ID.defaultZoneName {
            do {
                let result = try await self.database.modifyRecordZones(
                    saving: [CKRecordZone(zoneName: options.zoneName)], deleting: [])
                for (_, zone) in result.saveResults { _ = try zone.get() }
            } catch {
                throw CLIError.from(error, context: "cannot create zone \(options.zoneName)")
            }
        }

        let batchSize = options.batchSize
        let batchCount = (source.rows.count + batchSize - 1) / batchSize
        let rowsTotal = source.rows.count
        let started = ContinuousClock.now
        let counters = Locked((done: 0, doneThisRun: 0, reattached: 0, resent: 0))
        for index in 0..<batchCount where state.isDone(index) {
            counters.withLock { $0.done += min(batchSize, rowsTotal - index * batchSize) }
        }
        let report: @Sendable () -> Void = {
            guard let progress else { return }
            let elapsed = (ContinuousClock.now - started).secondsValue
            let (done, thisRun) = counters.withLock { ($0.done, $0.doneThisRun) }
            progress(ImportProgress(
                rowsDone: done, rowsTotal: rowsTotal, elapsed: elapsed,
                rowsPerSecond: elapsed > 0 ? Double(thisRun) / elapsed : 0))
        }
        report()

        let pending = (0..<batchCount).filter { !state.isDone($0) }
        let firstError = Locked<CLIError?>(nil)
        await withTaskGroup(of: Void.self) { group in
            var next = pending.makeIterator()
            func addNext() -> Bool {
                guard let index = next.next() else { return false }
                let rows = Array(source.rows[(index * batchSize)..<min((index + 1) * batchSize, rowsTotal)])
                let records = rows.map(source.record(for:))
                group.addTask {
                    guard firstError.withLock({ $0 }) == nil else { return }
                    do {
                        let how = try await self.runBatch(
                            index, rows: rows, records: records, store: store)
                        counters.withLock {
                            $0.done += rows.count
                            $0.doneThisRun += rows.count
                            if how == .reattached { $0.reattached += 1 }
                            if how == .resent { $0.resent += 1 }
                        }
                        report()
                    } catch {
                        firstError.withLock { $0 = $0 ?? CLIError.from(error) }
                    }
                }
                return true
            }
            for _ in 0..<self.parallel where addNext() {}
            while await group.next() != nil {
                _ = addNext()
            }
        }
        if let error = firstError.withLock({ $0 }) {
            // What finished is on disk, so that a resume does not send it again.
            try? await store.flush()
            throw CLIError(error.exitCode, "\(error.message) (the import can be finished with --resume)")
        }
        let finalState = await store.state
        await store.remove()
        let elapsed = (ContinuousClock.now - started).secondsValue
        let totals = counters.withLock { $0 }
        return ImportSummary(
            rows: rowsTotal,
            saved: finalState.saved,
            failed: finalState.failed,
            skipped: source.badRows,
            batches: batchCount,
            reattached: totals.reattached,
            resent: totals.resent,
            elapsed: elapsed,
            rowsPerSecond: elapsed > 0 ? Double(totals.doneThisRun) / elapsed : 0,
            importID: finalState.importID
        )
    }

    enum BatchRun { case sent, reattached, resent }

    /// Sends batch `index` (or re-attaches to it) until its result arrived.
    private func runBatch(
        _ index: Int, rows: [SourceRow], records: [CKRecord], store: ImportStateStore
    ) async throws(CLIError) -> BatchRun {
        let batch = await store.batch(index)
        var how = BatchRun.sent
        if let operationID = batch.operationIDs.last {
            how = .resent
            do {
                let operation = try await self.container.longLivedOperation(for: operationID)
                if let modify = operation as? CKModifyRecordsOperation {
                    let outcome = await self.execute(modify, add: { self.container.add(modify) })
                    if try await self.finish(index, rows: rows, sent: records.count, outcome: outcome, store: store) {
                        return .reattached
                    }
                }
            } catch let error as CKError where error.code == .unknownItem {
                // Never arrived, or acknowledged, or expired: send it again (same names, .allKeys).
            } catch let error as CLIError {
                throw error
            } catch {
                throw CLIError.from(error, context: "batch \(index + 1): cannot fetch operation \(operationID)")
            }
        }
        if records.isEmpty {
            try await store.update(index, durable: false) { $0.done = true }
            return how
        }
        var attempt = 0
        while true {
            attempt += 1
            let operation = CKModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)
            operation.savePolicy = .allKeys
            operation.isAtomic = false
            operation.configuration.isLongLived = true
            // Only the rows that fail come back: a saved record's copy is never looked at.
            operation.reportsSuccessfulItems = false
            let operationID = operation.operationID
            // The ID is on disk before the operation can reach the server.
            try await store.update(index) {
                $0.operationIDs.append(operationID)
                $0.persisted = false
            }
            operation.longLivedOperationWasPersistedBlock = {
                Task {
                    try? await store.update(index, durable: false) { if $0.operationIDs.last == operationID { $0.persisted = true } }
                }
            }
            let outcome = await self.execute(operation, add: { self.database.add(operation) })
            if try await self.finish(index, rows: rows, sent: records.count, outcome: outcome, store: store, lastAttempt: attempt >= self.maximumAttempts) {
                return how
            }
            try? await Task.sleep(for: .milliseconds(200 * (1 << min(attempt, 5))))
        }
    }

    struct Outcome: Sendable {
        /// The records the server reported: the failures, and the saves when the operation
        /// reports them (one started by an earlier version).
        var saved: [CKRecord.ID: Result<Void, CKError>] = [:]
        var result: Result<Void, CKError> = .success(())
    }

    /// Adds `operation` and waits for its result.
    private func execute(_ operation: CKModifyRecordsOperation, add: @Sendable () -> Void) async -> Outcome {
        let collected = Locked(Outcome())
        return await withCheckedContinuation { continuation in
            operation.perRecordSaveBlock = { id, result in
                collected.withLock {
                    $0.saved[id] = result.map { _ in () }.mapError { ($0 as? CKError) ?? CKError(.internalError, message: "\($0)") }
                }
            }
            operation.modifyRecordsResultBlock = { result in
                let outcome = collected.withLock { outcome in
                    if case .failure(let error) = result {
                        outcome.result = .failure((error as? CKError) ?? CKError(.internalError, message: "\(error)"))
                    }
                    return outcome
                }
                continuation.resume(returning: outcome)
            }
            add()
        }
    }

    private static let transient: Set<CKError.Code> = [
        .networkFailure, .networkUnavailable, .serviceUnavailable, .zoneBusy, .requestRateLimited, .serverResponseLost,
    ]

    /// Records a batch's outcome (`sent` records were in the operation; those it reports no
    /// failure of were saved); false when it should be sent again (a transient failure of
    /// the whole operation).
    private func finish(
        _ index: Int, rows: [SourceRow], sent: Int, outcome: Outcome, store: ImportStateStore, lastAttempt: Bool = false
    ) async throws(CLIError) -> Bool {
        if case .failure(let error) = outcome.result, error.code != .partialFailure {
            if Self.transient.contains(error.code) {
                if lastAttempt { throw CLIError.from(error, context: "batch \(index + 1)") }
                return false
            }
            try await store.update(index, durable: false) { batch in
                batch.done = true
                batch.failed += rows.map { BadRow(line: $0.line, message: CLIError.describe(error)) }
            }
            return true
        }
        let lines = Dictionary(rows.map { ($0.recordName, $0.line) }, uniquingKeysWith: { first, _ in first })
        var failed: [BadRow] = []
        for (id, result) in outcome.saved {
            if case .failure(let error) = result {
                failed.append(BadRow(line: lines[id.recordName] ?? 0, message: "record \(id.recordName): \(CLIError.describe(error))"))
            }
        }
        let saved = max(sent - failed.count, 0)
        try await store.update(index, durable: false) { batch in
            batch.done = true
            batch.saved = saved
            batch.failed += failed
        }
        return true
    }
}

extension Duration {
    var secondsValue: Double {
        let (seconds, attoseconds) = self.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
