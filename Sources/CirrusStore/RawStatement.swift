import Foundation
import GRDB
import GRDBSQLite

/// A hot-path statement (the rows every saved record writes, a replay's page of journaled
/// events), bound and stepped through SQLite's C API instead of GRDB's `StatementArguments`
/// and `Row`s: no boxed argument
/// array, no `DatabaseValue` per argument, no per-statement bookkeeping GRDB does for
/// observers the store never registers. The statement itself comes from the connection's
/// GRDB statement cache, so it is prepared once per connection.
///
/// Use it inside a transaction GRDB opened (a write's, or a read's for a SELECT), for SELECT,
/// INSERT, UPDATE and DELETE only (never BEGIN, COMMIT or SAVEPOINT, which GRDB must see).
/// Strings and blobs are copied by SQLite (`SQLITE_TRANSIENT`), so nothing bound has to
/// outlive the call; ``withBorrowedBindings(_:blob:at:_:)`` binds without the copy for the
/// span of a closure.
///
/// For example:
/// ```swift
/// var insert = try RawStatement(db, sql: "INSERT INTO t (a, b) VALUES (?, ?)")
/// insert.bind(1, 42)
/// insert.bind(2, "text")
/// try insert.run()
/// ```
struct RawStatement {
    private let db: Database
    private let handle: OpaquePointer

    /// The cached statement for `sql`, reset with its bindings cleared.
    init(_ db: Database, sql: String) throws {
        self.init(db, try db.cachedStatement(sql: sql))
    }

    /// The statement `slot` holds, or `sql`'s from the cache (then kept in `slot`), reset with
    /// its bindings cleared: for a statement a caller runs once per record, as the cache's
    /// lookup hashes the whole text of the SQL every time. Holding the statement keeps it
    /// prepared, whatever the cache does meanwhile.
    init(_ db: Database, sql: String, reusing slot: inout Statement?) throws {
        if let statement = slot {
            self.init(db, statement)
        } else {
            let statement = try db.cachedStatement(sql: sql)
            slot = statement
            self.init(db, statement)
        }
    }

    private init(_ db: Database, _ statement: Statement) {
        self.db = db
        handle = statement.sqliteStatement
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    /// SQLite's "copy it now" destructor: bound text and blobs may go away after the call.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    func bind(_ index: Int32, _ value: Int64) {
        sqlite3_bind_int64(handle, index, value)
    }

    func bind(_ index: Int32, _ value: Int) {
        sqlite3_bind_int64(handle, index, Int64(value))
    }

    func bind(_ index: Int32, _ value: Double) {
        sqlite3_bind_double(handle, index, value)
    }

    func bind(_ index: Int32, _ value: String) {
        var value = value
        value.withUTF8 { bytes in
            // An empty buffer may have no address, and a NULL pointer would bind NULL.
            if let base = bytes.baseAddress {
                base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                    _ = sqlite3_bind_text(handle, index, $0, Int32(bytes.count), Self.transient)
                }
            } else {
                _ = sqlite3_bind_text(handle, index, "", 0, Self.transient)
            }
        }
    }

    func bind(_ index: Int32, _ value: String?) {
        if let value { bind(index, value) } else { bindNull(index) }
    }

    func bind(_ index: Int32, _ value: Int64?) {
        if let value { bind(index, value) } else { bindNull(index) }
    }

    func bind(_ index: Int32, _ value: Double?) {
        if let value { bind(index, value) } else { bindNull(index) }
    }

    /// Binds bytes as a blob (an empty one is a zero-length blob, not NULL).
    func bind(_ index: Int32, bytes value: [UInt8]) {
        value.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress {
                _ = sqlite3_bind_blob(handle, index, base, Int32(bytes.count), Self.transient)
            } else {
                _ = sqlite3_bind_zeroblob(handle, index, 0)
            }
        }
    }

    func bind(_ index: Int32, _ value: Data) {
        value.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress, bytes.count > 0 {
                _ = sqlite3_bind_blob(handle, index, base, Int32(bytes.count), Self.transient)
            } else {
                _ = sqlite3_bind_zeroblob(handle, index, 0)
            }
        }
    }

    func bindNull(_ index: Int32) {
        sqlite3_bind_null(handle, index)
    }

    /// Binds `texts` and, at `blobIndex`, `blob` without SQLite copying them, runs `body`
    /// (which steps the statement), then clears every binding: SQLite reads the bytes in
    /// place while `body` runs and never holds a pointer to them after. For the rows of every
    /// saved record, where copying each text and the record's bytes (an allocation each) was
    /// a tenth of what binding and stepping the insert cost.
    func withBorrowedBindings<Result>(
        _ texts: BorrowedTexts, blob: [UInt8], at blobIndex: Int32, _ body: () throws -> Result
    ) rethrows -> Result {
        defer { sqlite3_clear_bindings(handle) }
        return try blob.withUnsafeBytes { blobBytes in
            if let base = blobBytes.baseAddress {
                _ = sqlite3_bind_blob(handle, blobIndex, base, Int32(blobBytes.count), Self.borrowed)
            } else {
                _ = sqlite3_bind_zeroblob(handle, blobIndex, 0)
            }
            return try texts.bytes.withUnsafeBufferPointer { textBytes in
                // Every slot's bytes were appended to `bytes`: with any slot, it has an address.
                for slot in texts.slots {
                    if slot.count < 0 {
                        sqlite3_bind_null(handle, slot.index)
                    } else if let base = textBytes.baseAddress {
                        base.advanced(by: slot.start).withMemoryRebound(to: CChar.self, capacity: slot.count) {
                            _ = sqlite3_bind_text(handle, slot.index, $0, Int32(slot.count), Self.borrowed)
                        }
                    } else {
                        _ = sqlite3_bind_text(handle, slot.index, "", 0, Self.transient)
                    }
                }
                return try body()
            }
        }
    }

    /// SQLite's "the bytes stay put" destructor: bound text is read in place, never copied.
    private static let borrowed = unsafeBitCast(0, to: sqlite3_destructor_type.self)

    /// Steps the statement to its end, then resets it (bindings kept until the next init).
    ///
    /// - throws: `DatabaseError` with SQLite's code and message when the step fails.
    func run() throws {
        let code = sqlite3_step(handle)
        guard code == SQLITE_DONE || code == SQLITE_ROW else {
            let error = self.failure(code)
            sqlite3_reset(handle)
            throw error
        }
        sqlite3_reset(handle)
    }

    /// Steps an INSERT to its end, then resets it: false, with nothing written, when it would
    /// break a UNIQUE constraint (SQLite undoes the failed statement; the transaction goes on).
    ///
    /// - throws: `DatabaseError` when the step fails otherwise.
    func runUnlessUniqueViolated() throws -> Bool {
        let code = sqlite3_step(handle)
        guard code == SQLITE_DONE || code == SQLITE_ROW else {
            // SQLITE_CONSTRAINT_UNIQUE, a macro Swift does not import: (SQLITE_CONSTRAINT | (8<<8)).
            let unique = sqlite3_extended_errcode(db.sqliteConnection) == SQLITE_CONSTRAINT | (8 << 8)
            let error = self.failure(code)
            sqlite3_reset(handle)
            if unique { return false }
            throw error
        }
        sqlite3_reset(handle)
        return true
    }

    /// The rowid of the connection's last successful INSERT: this statement's, read right after
    /// it ran. Read from SQLite directly; GRDB's `Database.lastInsertedRowID` first checks
    /// that it is called on the connection's queue, a lookup per saved record.
    var lastInsertedRowID: Int64 {
        sqlite3_last_insert_rowid(db.sqliteConnection)
    }

    /// Steps through every row of a query, calling `body` with each (valid only during the
    /// call), then resets the statement. For hot reads (a journal page) that GRDB's `Row`
    /// would copy into a dictionary-like value per row.
    ///
    /// - throws: `DatabaseError` when a step fails; what `body` throws.
    func forEachRow(_ body: (RawRow) throws -> Void) throws {
        defer { sqlite3_reset(handle) }
        while true {
            let code = sqlite3_step(handle)
            switch code {
            case SQLITE_ROW:
                try body(RawRow(handle: handle))
            case SQLITE_DONE:
                return
            default:
                throw self.failure(code)
            }
        }
    }

    /// Steps once and reads the row with `body`: nil when there is no row. For the lookups by
    /// key every fetch and write makes, which GRDB's `Row` would copy column by column first.
    ///
    /// - throws: `DatabaseError` when the step fails.
    func firstRow<T>(_ body: (RawRow) throws -> T) throws -> T? {
        let code = sqlite3_step(handle)
        defer { sqlite3_reset(handle) }
        switch code {
        case SQLITE_ROW:
            return try body(RawRow(handle: handle))
        case SQLITE_DONE:
            return nil
        default:
            throw self.failure(code)
        }
    }

    /// Steps once and reads column 0 as an integer: nil when there is no row (or it is NULL).
    ///
    /// - throws: `DatabaseError` when the step fails.
    func int64() throws -> Int64? {
        let code = sqlite3_step(handle)
        defer { sqlite3_reset(handle) }
        switch code {
        case SQLITE_ROW:
            return sqlite3_column_type(handle, 0) == SQLITE_NULL ? nil : sqlite3_column_int64(handle, 0)
        case SQLITE_DONE:
            return nil
        default:
            throw self.failure(code)
        }
    }

    /// The error of a step that returned `code`, with SQLite's message (read before a reset
    /// replaces it) and the statement's SQL.
    private func failure(_ code: Int32) -> DatabaseError {
        DatabaseError(
            resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)),
            sql: sqlite3_sql(handle).map { String(cString: $0) })
    }
}

/// The row a ``RawStatement`` is on, read by column position.
struct RawRow {
    fileprivate let handle: OpaquePointer

    /// Column `index` as an integer (0 when NULL).
    func int64(_ index: Int32) -> Int64 {
        sqlite3_column_int64(handle, index)
    }

    /// Column `index` as a 32-bit integer (0 when NULL).
    func int32(_ index: Int32) -> Int32 {
        sqlite3_column_int(handle, index)
    }

    /// Column `index` as text (empty when NULL); invalid UTF-8 is repaired, as GRDB does.
    func string(_ index: Int32) -> String {
        // sqlite3_column_text first, then sqlite3_column_bytes: the order SQLite documents.
        guard let text = sqlite3_column_text(handle, index) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, index))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    /// Column `index` as bytes: a blob's (or text's) bytes, empty when NULL.
    func bytes(_ index: Int32) -> [UInt8] {
        // sqlite3_column_blob first, then sqlite3_column_bytes: the order SQLite documents.
        guard let base = sqlite3_column_blob(handle, index) else { return [] }
        let count = Int(sqlite3_column_bytes(handle, index))
        return [UInt8](UnsafeRawBufferPointer(start: base, count: count))
    }
}

/// Texts to bind by parameter index without SQLite copying them
/// (``RawStatement/withBorrowedBindings(_:blob:at:_:)``): their UTF-8 bytes side by side in one
/// buffer, which a writer keeps and refills for every row instead of allocating per text.
struct BorrowedTexts: Sendable {
    fileprivate struct Slot {
        var index: Int32
        var start: Int
        /// -1 for NULL.
        var count: Int
    }

    fileprivate var bytes: [UInt8] = []
    fileprivate var slots: [Slot] = []

    /// The room of its text buffer, in bytes.
    var capacity: Int { bytes.capacity }

    /// Forgets every text, keeping the buffers' room.
    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        slots.removeAll(keepingCapacity: true)
    }

    /// `value` for parameter `index` (NULL when nil).
    mutating func append(_ index: Int32, _ value: String?) {
        guard let value else {
            slots.append(Slot(index: index, start: bytes.count, count: -1))
            return
        }
        let start = bytes.count
        bytes.append(contentsOf: value.utf8)
        slots.append(Slot(index: index, start: start, count: bytes.count - start))
    }
}
