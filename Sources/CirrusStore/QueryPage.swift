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

extension QueryPage {
    /// A page of `records`, for which `examined` stored records were loaded; when more
    /// results follow `last`, continued by `cursor(last)` sealed for `database`. One code for
    /// every engine's first and continued pages.
    package init(
        records: [Wire.Record], examined: Int, more: Bool, last: QueryKeyset.Position?, for database: DatabaseKey,
        secret: [UInt8], cursor: (QueryKeyset.Position) -> QueryCursor
    ) {
        self.init(records: records, cursor: nil)
        self.recordsExamined = examined
        if more, let last { self.cursor = cursor(last).sealed(for: database, secret: secret) }
    }
}

/// The fields a continued query returns.
public enum QueryContinuationKeys: Sendable, Hashable {
    /// The desired keys of the query that made the cursor.
    case sameAsQuery
    /// nil = all fields; [] = system fields only; else these fields.
    case replaced([String]?)
}
