import CirrusServer
import CirrusStore
import CirrusWire
import Foundation

/// A completed long-lived operation of `count` journaled events in a temporary SQLite store,
/// and an in-process server that replays it to a loopback TLS client on `Resume`.
final class ReplayBench: Sendable {
    static let operationID = "replayed"
    static let key = LongLivedOperationKey(owner: "_alice", operationID: operationID)

    let storage: SQLiteStorage
    let loopback: LoopbackBench
    let directory: String

    init(certificates: String, events count: Int, payload: Wire.Event.Payload) async throws {
        self.directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-replay-\(UUID().uuidString)").path
        self.storage = try SQLiteStorage(directory: self.directory)
        let open = Wire.Open(operationID: Self.operationID, databaseScope: .private, containerIdentifier: "iCloud.bench")
        let now = SQLiteStorage.systemClock()
        _ = try await self.storage.registerLongLivedOperation(Self.key, open: open, at: now)
        var journaled = 0
        while journaled < count {
            let batch = min(1_000, count - journaled)
            _ = try await self.storage.appendLongLivedEvents(
                Array(repeating: payload, count: batch), to: Self.key, checkpoint: nil)
            journaled += batch
        }
        _ = try await self.storage.completeLongLivedOperation(Self.key, complete: Wire.Complete(), at: now)
        let executor = StorageExecutor(storage: self.storage)
        let longLived = LongLivedOperations(journal: self.storage, executor: executor)
        self.loopback = try await LoopbackBench(certificates: certificates, executor: executor, longLivedOperations: longLived)
    }

    /// Reads the whole journal the way a follower pages through it.
    func readJournal(pageSize: Int) async throws -> Int {
        var seq: UInt64 = 0
        var read = 0
        while true {
            let page = try await self.storage.longLivedEvents(Self.key, after: seq, limit: pageSize)
            guard let last = page.last else { return read }
            read += page.count
            seq = last.seq
        }
    }

    /// Resumes the operation from its first event over TLS; returns the events received.
    func replayOnce() async throws -> Int {
        try await self.loopback.streamOnce(resuming: Self.operationID)
    }

    func close() async {
        await self.loopback.close()
        try? self.storage.destroy()
    }
}
