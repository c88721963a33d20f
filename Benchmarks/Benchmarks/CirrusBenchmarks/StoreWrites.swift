import CirrusStore
import CirrusWire
import Foundation
import Synchronization

/// `SQLiteStorage.modifyRecords` called directly (no network, no codec): the
/// store's write path alone, in a temporary directory, WAL with synchronous = FULL.
final class StoreWriteBench: Sendable {
    let storage: SQLiteStorage
    private let key = DatabaseKey.private(container: "iCloud.bench", user: "_alice")
    /// Numbers record names so every save creates a new record.
    private let counter = Atomic<Int>(0)

    init() throws {
        storage = try SQLiteStorage.temporary()
    }

    /// `count` new records of three fields (a string, two integers).
    func records(_ count: Int) -> [Wire.Record] {
        let first = counter.add(count, ordering: .relaxed).oldValue
        let zone = Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: key.owner)
        return (first..<first + count).map { index in
            Wire.Record(
                recordID: Wire.RecordID(recordName: "r\(index)", zoneID: zone), recordType: "Note",
                fields: [
                    Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue("Note number \(index)"))),
                    Wire.RecordField(key: "count", value: Wire.FieldValue(kind: .int64Value(Int64(index)))),
                    Wire.RecordField(key: "done", value: Wire.FieldValue(kind: .int64Value(Int64(index % 2)))),
                ])
        }
    }

    /// One operation saving `records`.
    func save(_ records: [Wire.Record]) async throws {
        let result = try await storage.modifyRecords(RecordModification(saving: records), in: key, by: "_alice")
        guard !result.hasFailures else { throw StoreError(.storageFailure, "a benchmark save failed") }
    }

    /// `count` single-record operations with `inFlight` outstanding at a time (group commit).
    func saveSingles(_ count: Int, inFlight: Int) async throws {
        let records = records(count)
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = 0
            while next < min(inFlight, records.count) {
                let record = records[next]
                group.addTask { try await self.save([record]) }
                next += 1
            }
            while try await group.next() != nil {
                if next < records.count {
                    let record = records[next]
                    group.addTask { try await self.save([record]) }
                    next += 1
                }
            }
        }
    }

    func close() {
        try? storage.destroy()
    }
}
