import Logging
import PostgresNIO
import Synchronization

/// Planner statistics for a database that autovacuum has not analyzed yet.
///
/// A new database has none until autovacuum first analyzes its tables (it looks every
/// `autovacuum_naptime`, a minute by default). Until then PostgreSQL may look records up by
/// name through an index that does not lead with the name (`records_by_modified`) and read the
/// whole zone for each lookup: measured with 2,000 records in a zone, 641 fetches/s instead of
/// 2,073, and 400-record saves at 318 records/s instead of 7,968. So once a node has written
/// ``threshold`` items, it analyzes the tables of records that were never analyzed, once; a
/// database already in service (analyzed by autovacuum or by an administrator) is left alone.
///
/// For example:
/// ```swift
/// let statistics = PostgresColdStatistics(client: client, leaseTimeout: .seconds(10), logger: logger)
/// storage.observeCommits { statistics.noteWritten($0.items) }
/// ```
final class PostgresColdStatistics: Sendable {
    /// The tables whose plans a record lookup, a feed or a query depends on.
    static let tables = ["records", "record_values", "record_words", "tombstones", "asset_references", "zones"]
    /// Items this node writes before it looks.
    let threshold: Int
    private let client: PostgresClient
    private let leaseTimeout: Duration
    private let logger: Logger
    /// Items written so far, and whether the analysis started.
    private let state = Mutex<(written: Int, started: Bool)>((0, false))

    init(client: PostgresClient, leaseTimeout: Duration, logger: Logger, threshold: Int = 500) {
        self.client = client
        self.leaseTimeout = leaseTimeout
        self.logger = logger
        self.threshold = threshold
    }

    /// Counts `items` written; the first time the count reaches ``threshold``, analyzes the
    /// tables never analyzed, in a task of its own (the writer does not wait for it).
    func noteWritten(_ items: Int) {
        let start = state.withLock { state -> Bool in
            guard !state.started else { return false }
            state.written += items
            guard state.written >= threshold else { return false }
            state.started = true
            return true
        }
        guard start else { return }
        Task { await self.analyzeNeverAnalyzed() }
    }

    /// Analyzes those of ``tables`` that neither autovacuum nor anyone analyzed yet; returns
    /// their names. A failure (the server gone, the storage closed) is logged and ends it: the
    /// autovacuum does it later.
    @discardableResult
    func analyzeNeverAnalyzed() async -> [String] {
        let logger = self.logger
        do {
            return try await client.withConnection(leaseTimeout: leaseTimeout) { connection in
                var bindings = PostgresBindings(capacity: 1)
                bindings.append(Self.tables)
                let rows = try await connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            SELECT relname::text FROM pg_stat_user_tables
                            WHERE relname = ANY($1) AND last_analyze IS NULL AND last_autoanalyze IS NULL
                            ORDER BY relname
                            """,
                        binds: bindings), logger: logger)
                var names: [String] = []
                for try await name in rows.decode(String.self) where Self.tables.contains(name) { names.append(name) }
                guard !names.isEmpty else { return [] }
                // The names are this type's own (checked against `tables`), never a peer's.
                try await connection.query(PostgresQuery(unsafeSQL: "ANALYZE " + names.joined(separator: ", ")), logger: logger)
                logger.info("analyzed the tables of a new database", metadata: ["tables": "\(names.joined(separator: ","))"])
                return names
            }
        } catch {
            logger.debug("could not analyze a new database's tables (autovacuum will): \(error)")
            return []
        }
    }
}
