public import CirrusWire

/// One page of a query's results (CKQueryOperation's matched records and cursor).
///
/// For example:
/// ```swift
/// var page = try await storage.queryRecords(query, in: zoneID, of: key, desiredKeys: nil, limit: 100)
/// while let cursor = page.cursor {
///     page = try await storage.continueQuery(cursor, in: key, desiredKeys: .sameAsQuery, limit: 100)
/// }
/// ```
public struct QueryPage: Sendable, Hashable {
    /// Matching records in the query's order, restricted to the desired keys.
    public var records: [Wire.Record]
    /// Continues the query after these records; nil = no more results.
    public var cursor: [UInt8]?
    /// Stored records this page loaded and checked against the predicate
    /// (how well the indexes narrowed the query down; for tests).
    package var recordsExamined = 0

    public init(records: [Wire.Record], cursor: [UInt8]?) {
        self.records = records
        self.cursor = cursor
    }
}

/// The fields a continued query returns.
public enum QueryContinuationKeys: Sendable, Hashable {
    /// The desired keys of the query that made the cursor.
    case sameAsQuery
    /// nil = all fields; [] = system fields only; else these fields.
    case replaced([String]?)
}
