import Foundation

/// What an import has done so far, kept in a JSON file so `cirrus import --resume` can finish
/// it after the client was killed. Rewritten atomically (temporary file + rename) on every
/// change.
package struct ImportState: Sendable, Codable {
    /// One batch of up to `batchSize` good rows, in file order.
    package struct Batch: Sendable, Codable {
        package var index: Int
        /// Every long-lived operation ID this batch was sent as, written before it was sent;
        /// only the last can still exist on the server.
        package var operationIDs: [String] = []
        /// The server said the last operation is durable (`longLivedOperationWasPersistedBlock`).
        package var persisted = false
        /// Its result arrived; nothing more to do.
        package var done = false
        package var saved = 0
        package var failed: [BadRow] = []
    }

    package var version = 1
    /// Part of every record name an import makes up (`<importID>-<line>`).
    package var importID: String
    package var inputPath: String
    package var inputSize: UInt64
    package var inputModified: Double
    package var options: ImportOptions
    /// The batches not folded into the finished prefix below.
    package var batches: [Int: Batch] = [:]
    /// Batches `0..<finishedPrefix` are done and kept only as totals, so that the file (rewritten
    /// on every change) stays as small as the batches in flight; nil in files written before
    /// there was a prefix (the same as 0).
    package var finishedPrefix: Int?
    /// Rows the finished prefix saved.
    package var finishedPrefixSaved: Int?
    /// Rows the finished prefix could not save.
    package var finishedPrefixFailed: [BadRow]?

    /// Whether batch `index` is done.
    package func isDone(_ index: Int) -> Bool {
        index < (self.finishedPrefix ?? 0) || self.batches[index]?.done == true
    }

    /// How many batches are done.
    package var doneCount: Int {
        (self.finishedPrefix ?? 0) + self.batches.values.filter(\.done).count
    }

    /// Rows saved by every batch so far.
    package var saved: Int {
        (self.finishedPrefixSaved ?? 0) + self.batches.values.reduce(0) { $0 + $1.saved }
    }

    /// Rows that could not be saved, by every batch so far, in line order.
    package var failed: [BadRow] {
        ((self.finishedPrefixFailed ?? []) + self.batches.values.flatMap(\.failed)).sorted { $0.line < $1.line }
    }

    /// Folds the done batches that follow the finished prefix into it.
    mutating func foldFinishedPrefix() {
        var prefix = self.finishedPrefix ?? 0
        while let batch = self.batches[prefix], batch.done {
            self.finishedPrefixSaved = (self.finishedPrefixSaved ?? 0) + batch.saved
            if !batch.failed.isEmpty { self.finishedPrefixFailed = (self.finishedPrefixFailed ?? []) + batch.failed }
            self.batches[prefix] = nil
            prefix += 1
        }
        self.finishedPrefix = prefix
    }

    /// The default state file of `inputPath`: next to it, `.cirrus-import` appended.
    package static func defaultPath(for inputPath: String) -> String {
        inputPath + ".cirrus-import"
    }

    package static func load(from path: String) throws(CLIError) -> ImportState {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw CLIError(.notFound, "no import to resume: cannot read state file \(path)")
        }
        do {
            return try JSONDecoder().decode(ImportState.self, from: data)
        } catch {
            throw CLIError(.badInput, "state file \(path) is damaged: \(error)")
        }
    }

    package func save(to path: String) throws(CLIError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            try encoder.encode(self).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw CLIError(.failure, "cannot write state file \(path): \(error)")
        }
    }
}

/// The state of one import, shared by its batches.
///
/// What decides what a resume sends — an operation ID, before its operation can reach the
/// server — is on disk before `update` returns. A batch's result, and that the server persisted
/// its operation, go to disk with the next such change (or `flush`): the state file was written
/// three times per batch, each time encoded whole, written to a temporary file, synced and
/// renamed, and that was a fifth of an import's CPU. Lost in a crash, a result costs only a
/// re-attach to the batch's operation or a resend under the same record names: the same rows,
/// never a second copy.
actor ImportStateStore {
    private(set) var state: ImportState
    let path: String
    /// Whether `state` has changes the file does not have.
    private var unsaved = false

    init(state: ImportState, path: String) {
        self.state = state
        self.path = path
    }

    func batch(_ index: Int) -> ImportState.Batch {
        self.state.batches[index] ?? ImportState.Batch(index: index)
    }

    /// Changes batch `index`; with `durable`, the change (and every one before it) is on disk
    /// when this returns.
    func update(_ index: Int, durable: Bool = true, _ change: (inout ImportState.Batch) -> Void) throws(CLIError) {
        var batch = self.batch(index)
        change(&batch)
        self.state.batches[index] = batch
        self.state.foldFinishedPrefix()
        self.unsaved = true
        if durable { try self.flush() }
    }

    /// Writes the changes the file does not have yet.
    func flush() throws(CLIError) {
        guard self.unsaved else { return }
        try self.state.save(to: self.path)
        self.unsaved = false
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: self.path)
    }
}
