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

    func data(sql: String, arguments: StatementArguments = StatementArguments()) throws -> Data? {
        try Data.fetchOne(cachedStatement(sql: sql), arguments: arguments)
    }
}
