import CirrusWire
import Foundation
import GRDB

/// Which fields of a zone's records of one type are indexed for queries (schema v16,
/// `indexed_fields`): a field's `record_values` rows and a record's full-text row are written
/// only once a query needed them, as CloudKit indexes only the fields a schema marks queryable,
/// sortable or searchable. A save of a record whose fields no query ever named writes its row
/// in `records` and nothing else, about half the B-tree work of writing every value twice.
///
/// A zone's records of a type, for one field (or for their text), go through three states:
/// - **not indexed** (no row): saves write none of its rows;
/// - **being built** (`built_through` is a row ID): saves write its rows, and ``build(_:zoneID:recordType:_:)``
///   has indexed every record up to that row ID; it indexes the rest in chunks, each its own
///   write job, so saves are never held back by more than one chunk;
/// - **indexed** (`built_through` NULL): every record has its rows.
///
/// A query reads through the index only in a snapshot where every field it names is indexed
/// (``missing(_:zoneID:recordType:_:)``); otherwise it has the index built and reads again.
/// A chunk deletes and writes again the rows of each record it reads, so a record saved while
/// the index is built ends up with the rows of its current version whichever came first.
///
/// Data directories from before v16 mark every zone and type that had records with the key
/// ``everything``: their saves go on writing every field's rows and their text.
///
/// The record's own columns (schema v17) are indexed the same way, under the key ``system``:
/// `records_by_type` (every query's candidates), `records_by_created`, `records_by_modified`
/// and `records_by_creator` are partial indexes of the rows whose `sys_indexed` is 1, which
/// saves write only for a zone and type some query has read: four of a record's seven B-tree
/// entries, about a third of the writer's time per record, which a zone only synced through
/// change feeds never needs. Every query needs them, so a zone and type's first query builds
/// them (before any field of it, whose build reads `records_by_type`): it sets `sys_indexed`
/// on every record, reading the zone in change order (`records_by_seq`, so a zone's build
/// never reads another zone). Once complete, every row of the zone's records of the type has
/// it, so a query adds `sys_indexed = 1` (which SQLite needs to read a partial index) without
/// changing what it finds.
enum FieldIndexing {
    /// The `key` of the full-text index (every string of a record, for `self CONTAINS`):
    /// no field is named with the empty string (``RecordCodec/checkFieldKey(_:)``).
    static let text = ""
    /// The `key` that indexes every field and the text (data written before schema v16).
    static let everything = "*"
    /// The `key` of the record's own columns in their indexes (`records_by_type`,
    /// `records_by_created`, `records_by_modified`, `records_by_creator`): no field is named
    /// with an "@" (``RecordCodec/checkFieldKey(_:)``). Its `built_through` is a change
    /// sequence of the zone, not a row ID (``buildSystem(_:zoneID:recordType:after:)``).
    static let system = "@system"
    /// Records one build job indexes.
    static let chunkRecords = 1_000
    /// Fields (and the text) queries may have indexed per zone and record type. Each costs a
    /// read of every record of the type once, so a client naming ever new fields cannot make
    /// the writer read a zone again and again; a query naming one more is refused.
    static let maximumIndexedFields = 64

    /// What a zone's saves of one record type index: rows for `keys` (every field when `all`),
    /// and the text when `text`.
    struct Indexed: Sendable, Equatable {
        var all = false
        var text = false
        var keys: Set<String> = []
        /// Whether saves set `sys_indexed` (the record's own columns in their indexes).
        var system = false

        /// Whether saves write `record_values` or full-text rows.
        var writesRows: Bool { all || text || !keys.isEmpty }
    }

    /// What a query needs indexed: the fields it names and, for `self CONTAINS`, the text.
    struct Needs: Sendable, Hashable {
        var keys: Set<String> = []
        var text = false
        /// The record's own columns in their indexes (``FieldIndexing/system``).
        var system = false

        var isEmpty: Bool { keys.isEmpty && !text && !system }

        /// The fields a query's predicate and sorts name, anywhere in them, and the record's
        /// own columns, which every query reads.
        init(_ query: CompiledQuery) {
            self.system = true
            func visit(_ node: QueryNode) {
                switch node {
                case .constant: break
                case .comparison(let comparison):
                    if case .field(let key) = comparison.subject { keys.insert(key) }
                case .and(let operands): operands.forEach(visit)
                case .not(let operand): visit(operand)
                case .text: text = true
                case .distance(let distance): keys.insert(distance.key)
                }
            }
            visit(query.predicate)
            for sort in query.sorts {
                switch sort.key {
                case .field(let key): keys.insert(key)
                case .distance(let key, _, _): keys.insert(key)
                case .creationDate, .modificationDate: break
                }
            }
        }

        init(keys: Set<String>, text: Bool, system: Bool = false) {
            self.keys = keys
            self.text = text
            self.system = system
        }

        /// The `indexed_fields` keys of the fields, and ``FieldIndexing/text`` for the text.
        var markers: [String] { keys.sorted() + (text ? [FieldIndexing.text] : []) }
    }

    /// What saves to zone `zoneID` of records of `recordType` index (indexes being built included).
    static func indexed(_ db: Database, zoneID: Int64, recordType: String) throws -> Indexed {
        let statement = try RawStatement(db, sql: "SELECT key FROM indexed_fields WHERE zone_id = ? AND record_type = ?")
        statement.bind(1, zoneID)
        statement.bind(2, recordType)
        var indexed = Indexed()
        try statement.forEachRow { row in
            switch row.string(0) {
            case everything: indexed.all = true; indexed.text = true; indexed.system = true
            case text: indexed.text = true
            case system: indexed.system = true
            case let key: indexed.keys.insert(key)
            }
        }
        return indexed
    }

    /// What of `needs` is not (completely) indexed in this snapshot; nil when a query may read
    /// through the index.
    static func missing(_ db: Database, zoneID: Int64, recordType: String, _ needs: Needs) throws -> Needs? {
        if needs.isEmpty { return nil }
        let rows = try db.rows(
            sql: "SELECT key FROM indexed_fields WHERE zone_id = ? AND record_type = ? AND built_through IS NULL",
            arguments: [zoneID, recordType])
        let complete = Set(rows.map { $0[0] as String })
        if complete.contains(everything) { return nil }
        let missing = Needs(
            keys: needs.keys.subtracting(complete), text: needs.text && !complete.contains(text),
            system: needs.system && !complete.contains(system))
        return missing.isEmpty ? nil : missing
    }

    /// Indexes up to ``chunkRecords`` more records for each of `needs` in zone `zoneID` (a
    /// write job: marks what was not marked yet as being built, from the first record);
    /// true once every one of them is indexed.
    static func build(_ db: Database, zoneID: Int64, recordType: String, _ needs: Needs) throws -> Bool {
        // A zone deleted meanwhile: nothing to build (the query finds it gone).
        guard try db.int64(sql: "SELECT id FROM zones WHERE id = ? AND deleted_at IS NULL", arguments: [zoneID]) != nil else {
            return true
        }
        var done = true
        // The record's own columns first, whatever `needs` says: a field's build reads the
        // records of the type through `records_by_type`, which holds only the rows they are in.
        for key in [system] + needs.markers {
            let row = try db.row(
                sql: """
                    SELECT built_through FROM indexed_fields WHERE zone_id = ? AND record_type = ? AND key IN (?, ?)
                    ORDER BY built_through IS NOT NULL LIMIT 1
                    """,
                arguments: [zoneID, recordType, key, everything])
            let start: Int64
            if let row {
                guard let through = row[0] as Int64? else { continue }  // indexed
                start = through
            } else {
                // The record's own columns are one build per zone and type, whatever a client
                // names: never refused, and not counted.
                let marked = try db.int64(
                    sql: "SELECT count(*) FROM indexed_fields WHERE zone_id = ? AND record_type = ? AND key != ?",
                    arguments: [zoneID, recordType, system]) ?? 0
                guard key == system || marked < maximumIndexedFields else {
                    throw StoreError(
                        .limitExceeded,
                        "queries have indexed \(maximumIndexedFields) fields of \(recordType) records in this zone, the most there may be; "
                            + "\(key == text ? "the text" : "field \(key)") is not indexed")
                }
                try db.run(
                    sql: "INSERT INTO indexed_fields (zone_id, record_type, key, built_through) VALUES (?, ?, ?, 0)",
                    arguments: [zoneID, recordType, key])
                start = 0
            }
            if key == system {
                // Not complete yet: the fields' builds wait for the next job.
                guard try buildSystem(db, zoneID: zoneID, recordType: recordType, after: start) else { return false }
                continue
            }
            let read = try RawStatement(
                db,
                sql: """
                    SELECT id, data FROM records INDEXED BY records_by_type
                    WHERE zone_id = ? AND record_type = ? AND sys_indexed = 1 AND id > ? ORDER BY id LIMIT ?
                    """)
            read.bind(1, zoneID)
            read.bind(2, recordType)
            read.bind(3, start)
            read.bind(4, chunkRecords)
            var records: [(id: Int64, data: [UInt8])] = []
            try read.forEachRow { records.append(($0.int64(0), $0.bytes(1))) }
            for (id, data) in records {
                let record = try RecordRow.record(data, id: id)
                if key == text {
                    try db.run(sql: "DELETE FROM record_text WHERE rowid = ?", arguments: [id])
                    try StoreRows.insertText(db, recordID: id, record: record)
                } else {
                    try db.run(sql: "DELETE FROM record_values WHERE record_id = ? AND key = ?", arguments: [id, key])
                    try StoreRows.insertValues(
                        db, recordID: id, zoneID: zoneID, recordType: recordType,
                        rows: RecordCodec.indexRows(of: record).filter { $0.key == key })
                }
            }
            let finished = records.count < chunkRecords
            let through: Int64? = finished ? nil : records.last?.id
            try db.run(
                sql: "UPDATE indexed_fields SET built_through = ? WHERE zone_id = ? AND record_type = ? AND key = ?",
                arguments: [through, zoneID, recordType, key])
            if !finished { done = false }
        }
        return done
    }

    /// Sets `sys_indexed` on the records of the type among up to ``chunkRecords`` more records
    /// of the zone, in change order after change sequence `start` (the ``system`` key's share of
    /// ``build(_:zoneID:recordType:_:)``); true once every record of the type has it. Read by
    /// `records_by_seq`, so the build reads this zone only. A record saved meanwhile is written
    /// with the flag (the key is marked) whether its new change sequence lies before or after
    /// where the build is.
    private static func buildSystem(
        _ db: Database, zoneID: Int64, recordType: String, after start: Int64
    ) throws -> Bool {
        let read = try RawStatement(
            db,
            sql: """
                SELECT id, change_seq, record_type = ? AND sys_indexed = 0 FROM records INDEXED BY records_by_seq
                WHERE zone_id = ? AND change_seq > ? ORDER BY change_seq LIMIT ?
                """)
        read.bind(1, recordType)
        read.bind(2, zoneID)
        read.bind(3, start)
        read.bind(4, chunkRecords)
        var rows = 0
        var last = start
        var ids: [Int64] = []
        try read.forEachRow { row in
            rows += 1
            last = row.int64(1)
            if row.int64(2) != 0 { ids.append(row.int64(0)) }
        }
        let update = try RawStatement(db, sql: "UPDATE records SET sys_indexed = 1 WHERE id = ?")
        for id in ids {
            update.bind(1, id)
            try update.run()
        }
        let finished = rows < chunkRecords
        // The next chunk starts at the last sequence read again, so that records sharing it
        // (a store's writes give each its own; nothing else promises it) are never skipped;
        // those already flagged are passed over. A chunk all of one sequence moves past it.
        let through = last - 1 > start ? last - 1 : last
        try db.run(
            sql: "UPDATE indexed_fields SET built_through = ? WHERE zone_id = ? AND record_type = ? AND key = ?",
            arguments: [finished ? nil : through, zoneID, recordType, system])
        return finished
    }
}
