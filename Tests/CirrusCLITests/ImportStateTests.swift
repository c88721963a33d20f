@testable import CirrusCLI
import Foundation
import Testing

/// The import's state file is rewritten when a batch is sent: done batches at its front fold
/// into totals, so each rewrite costs what the batches in flight cost, not the whole import.
@Suite("Import state")
struct ImportStateTests {
    static func state() -> ImportState {
        ImportState(
            importID: "imp", inputPath: "/rows.jsonl", inputSize: 10, inputModified: 0, options: ImportOptions())
    }

    static func done(_ index: Int, saved: Int, failed: [BadRow] = []) -> ImportState.Batch {
        var batch = ImportState.Batch(index: index)
        batch.done = true
        batch.saved = saved
        batch.failed = failed
        return batch
    }

    @Test func doneBatchesAtTheFrontFoldIntoTotals() throws {
        var state = Self.state()
        state.batches[1] = Self.done(1, saved: 3, failed: [BadRow(line: 9, message: "bad")])
        state.batches[2] = ImportState.Batch(index: 2, operationIDs: ["op-2"])
        state.foldFinishedPrefix()
        // Batch 0 is not done: nothing folds.
        #expect(state.finishedPrefix == 0 && state.batches.count == 2)
        #expect(!state.isDone(0) && state.isDone(1) && !state.isDone(2))

        state.batches[0] = Self.done(0, saved: 4, failed: [BadRow(line: 2, message: "worse")])
        state.foldFinishedPrefix()
        #expect(state.finishedPrefix == 2)
        #expect(Array(state.batches.keys) == [2])
        #expect(state.isDone(0) && state.isDone(1) && !state.isDone(2))
        #expect(state.doneCount == 2)
        #expect(state.saved == 7)
        #expect(state.failed.map(\.line) == [2, 9])

        // What a resumed import reads back is the same.
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("state-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try state.save(to: path)
        let loaded = try ImportState.load(from: path)
        #expect(loaded.finishedPrefix == 2 && loaded.saved == 7 && loaded.failed == state.failed)
        #expect(loaded.isDone(1) && !loaded.isDone(2))
        #expect(loaded.batches[2]?.operationIDs == ["op-2"])
    }

    @Test func aStateFileWrittenBeforeThePrefixStillResumes() throws {
        var state = Self.state()
        state.batches[0] = Self.done(0, saved: 5)
        state.batches[1] = ImportState.Batch(index: 1, operationIDs: ["op-1"])
        // The file an earlier `cirrus` wrote: every batch listed, no prefix keys.
        var object = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(state)) as? [String: Any])
        object["finishedPrefix"] = nil
        object["finishedPrefixSaved"] = nil
        object["finishedPrefixFailed"] = nil
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("state-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
        let loaded = try ImportState.load(from: path)
        #expect(loaded.finishedPrefix == nil)
        #expect(loaded.isDone(0) && !loaded.isDone(1))
        #expect(loaded.saved == 5 && loaded.doneCount == 1)
    }

    @Test func anOperationIDIsOnDiskAtOnceAndAResultWithTheNextWrite() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("state-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Self.state().save(to: path)
        let store = ImportStateStore(state: Self.state(), path: path)

        try await store.update(0) { $0.operationIDs.append("op-0") }
        #expect(try ImportState.load(from: path).batches[0]?.operationIDs == ["op-0"])

        // A result waits for the next write that must be on disk ...
        try await store.update(0, durable: false) {
            $0.done = true
            $0.saved = 4
        }
        #expect(try ImportState.load(from: path).isDone(0) == false)
        try await store.update(1) { $0.operationIDs.append("op-1") }
        var loaded = try ImportState.load(from: path)
        #expect(loaded.isDone(0) && loaded.saved == 4)
        #expect(loaded.batches[1]?.operationIDs == ["op-1"])

        // ... or for a flush (an import ending on an error).
        try await store.update(1, durable: false) { $0.done = true }
        #expect(try ImportState.load(from: path).isDone(1) == false)
        try await store.flush()
        loaded = try ImportState.load(from: path)
        #expect(loaded.isDone(1) && loaded.doneCount == 2)
    }
}

@Suite("Import lines")
struct ImportLineTests {
    @Test(arguments: [
        #"{"a": 1}"#, #"  {"a": 1}  "#, "{\"a\": 1}\r", "\t{}\t", "\u{00A0}{}\u{00A0}", "", "   ", "x", " é ", "é",
    ])
    func aLineIsTrimmedAsFoundationTrimsIt(_ line: String) {
        let substring = Substring(line)
        #expect(ImportSource.trimmed(substring) == substring.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
