import CirrusStore
import CirrusWire
import Foundation

/// A temporary SQLite store holding `records` records of `cirrus bench`'s shape in the
/// default zone (`bucket` = number % 16, `number`, a 64-byte payload), for timing the first
/// page of a query the way `cirrus bench`'s query mix asks it: `bucket == k`, 10 records.
final class QueryPageBench: Sendable {
    static let buckets = 16
    static let database = DatabaseKey.private(container: "iCloud.bench", user: "_alice")
    static let zone = Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "_alice")

    let storage: SQLiteStorage
    let directory: String

    /// - parameter indexed: whether a query on `bucket` ran once the zone was filled, as in a
    ///   zone that is queried: the store indexes a field when a query first names it.
    init(records count: Int, indexed: Bool = true) async throws {
        self.directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("cirrus-query-bench-\(UUID().uuidString)").path
        self.storage = try SQLiteStorage(directory: self.directory)
        let payload = Wire.FieldValue(kind: .bytesValue((0..<64).map { UInt8(truncatingIfNeeded: $0 &* 37) }))
        var saved = 0
        while saved < count {
            let batch = (saved..<min(saved + 400, count)).map { number in
                Wire.Record(
                    recordID: Wire.RecordID(recordName: "r\(number)", zoneID: Self.zone),
                    recordType: "BenchRecord",
                    fields: [
                        Wire.RecordField(key: "bucket", value: Wire.FieldValue(kind: .int64Value(Int64(number % Self.buckets)))),
                        Wire.RecordField(key: "number", value: Wire.FieldValue(kind: .int64Value(Int64(number)))),
                        Wire.RecordField(key: "payload", value: payload),
                    ])
            }
            _ = try await self.storage.modifyRecords(RecordModification(saving: batch), in: Self.database, by: "_alice")
            saved += batch.count
        }
        if indexed { _ = try await self.firstPage(bucket: 0) }
    }

    /// The first page (10 records) of `bucket == bucket`; returns whether a cursor came with it.
    func firstPage(bucket: Int) async throws -> Bool {
        let predicate = Wire.QueryPredicate(node: .comparison(Wire.ComparisonPredicate(
            key: "bucket", comparisonOperator: .equals, value: Wire.FieldValue(kind: .int64Value(Int64(bucket))))))
        let query = Wire.Query(recordType: "BenchRecord", predicate: predicate, sortDescriptors: [])
        let page = try await self.storage.queryRecords(query, in: Self.zone, of: Self.database, desiredKeys: nil, limit: 10)
        return page.cursor != nil
    }

    func close() {
        try? self.storage.close()
        try? FileManager.default.removeItem(atPath: self.directory)
    }
}
