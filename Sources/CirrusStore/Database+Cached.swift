import Foundation
import GRDB

/// Single statements through the connection's statement cache: the store runs
/// the same few statements for every record, so each is prepared once per
/// connection instead of once per call.
extension Database {
    func run(sql: String, arguments: StatementArguments = StatementArguments()) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }

    func row(sql: String, arguments: StatementArguments = StatementArguments()) throws -> Row? {
        try Row.fetchOne(cachedStatement(sql: sql), arguments: arguments)
    }

    func rows(sql: String, arguments: StatementArguments = StatementArguments()) throws -> [Row] {
        try Row.fetchAll(cachedStatement(sql: sql), arguments: arguments)
    }

    func int64(sql: String, arguments: StatementArguments = StatementArguments()) throws -> Int64? {
        try Int64.fetchOne(cachedStatement(sql: sql), arguments: arguments)
    }

    /// ``int64(sql:arguments:)`` for a statement of one integer argument, through SQLite's C
    /// API (``RawStatement``): no boxed argument, no cursor. For the lookups and updates the
    /// writer makes once per zone or database and transaction (a zone's change sequence,
    /// whether it has tombstones, the database's sequence and subscriptions generation), which
    /// under single-record saves run once per 17 records.
    func int64(sql: String, integer argument: Int64) throws -> Int64? {
        let statement = try RawStatement(self, sql: sql)
        statement.bind(1, argument)
        return try statement.int64()
    }

    func data(sql: String, arguments: StatementArguments = StatementArguments()) throws -> Data? {
        try Data.fetchOne(cachedStatement(sql: sql), arguments: arguments)
    }
}
