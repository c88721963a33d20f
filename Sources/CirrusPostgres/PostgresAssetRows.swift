import CirrusStore
import CirrusWire
import Logging
import NIOCore
import PostgresNIO

/// The asset rows a record write and a record read touch: which contents the server knows
/// (`assets`), which records refer to them (`asset_references`), and the inline bytes a
/// fetched record gets back.
enum PostgresAssetRows {
    /// The asset columns of a zone's saves, bound as arrays.
    struct Columns {
        /// One row per saved record and content it names.
        var recordNames: [String] = []
        var referenced: [ByteBuffer] = []
        /// The saved records whose earlier version named contents (their rows are replaced).
        var replacing: [String] = []
        /// Contents arriving with the saves, each once: inline bytes, or empty for a file of
        /// the asset store.
        var digests: [ByteBuffer] = []
        var sizes: [Int64] = []
        var contents: [ByteBuffer] = []
        private var seen = Set<[UInt8]>()

        /// Adds the asset rows of a saved record `name`: the contents it names, those that
        /// arrive with it, and whether it replaces a version that named some.
        mutating func append(
            _ name: String, checksums: Set<[UInt8]>, arriving: [RecordCodec.AssetContent], replaced: Wire.Record?
        ) {
            for checksum in checksums.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                recordNames.append(name)
                referenced.append(ByteBuffer(bytes: checksum))
            }
            for asset in arriving where seen.insert(asset.sha256).inserted {
                digests.append(ByteBuffer(bytes: asset.sha256))
                sizes.append(Int64(clamping: asset.size))
                contents.append(ByteBuffer(bytes: asset.content ?? []))
            }
            if let replaced, !RecordCodec.assetChecksums(in: replaced).isEmpty { replacing.append(name) }
        }

        var isEmpty: Bool { recordNames.isEmpty && replacing.isEmpty && digests.isEmpty }
    }

    /// Of `checksums`, those the server knows, each locked until the transaction ends
    /// (`FOR SHARE`): a drop of one in progress is waited for, and none starts before the
    /// save that names it commits.
    static func known(
        _ checksums: Set<[UInt8]>, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> Set<[UInt8]> {
        guard !checksums.isEmpty else { return [] }
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(checksums.sorted { $0.lexicographicallyPrecedes($1) }.map { ByteBuffer(bytes: $0) })
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: "SELECT sha256 FROM assets WHERE sha256 = ANY($1::bytea[]) ORDER BY sha256 FOR SHARE",
                binds: bindings), logger: logger)
        var known = Set<[UInt8]>()
        for try await digest in rows.decode(ByteBuffer.self) { known.insert(Array(buffer: digest)) }
        return known
    }

    /// Writes the asset rows of a zone's saves (after their record rows): the references of
    /// each saved record replace its earlier ones, and the arriving contents the server did
    /// not know are added.
    static func write(
        _ columns: Columns, zoneID: Int64, database key: DatabaseKey, _ connection: PostgresConnection, _ logger: Logger
    ) async throws {
        if !columns.recordNames.isEmpty || !columns.replacing.isEmpty {
            var bindings = PostgresRows.binds(key, zoneID)
            bindings.append(columns.recordNames)
            bindings.append(columns.referenced)
            bindings.append(columns.replacing)
            // A row the save keeps is neither deleted nor inserted again (ON CONFLICT DO
            // NOTHING), as for deleteSelf references.
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        WITH fresh AS (
                            SELECT * FROM unnest($5::text[], $6::bytea[]) AS saved (record_name, sha256)
                        ),
                        dropped AS (
                            DELETE FROM asset_references a
                            WHERE a.container = $1 AND a.owner = $2 AND a.scope = $3 AND a.zone_id = $4
                                AND a.record_name = ANY($7)
                                AND NOT EXISTS (
                                    SELECT 1 FROM fresh f WHERE f.record_name = a.record_name AND f.sha256 = a.sha256)
                        )
                        INSERT INTO asset_references (container, owner, scope, zone_id, record_name, sha256)
                        SELECT $1, $2, $3, $4, record_name, sha256 FROM fresh
                        ON CONFLICT DO NOTHING
                        """,
                    binds: bindings), logger: logger)
        }
        guard !columns.digests.isEmpty else { return }
        var bindings = PostgresBindings(capacity: 3)
        bindings.append(columns.digests)
        bindings.append(columns.sizes)
        bindings.append(columns.contents)
        // In checksum order, so two writers adding the same contents never wait on each other
        // in opposite orders.
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO assets (sha256, size, content)
                    SELECT sha256, size, content FROM unnest($1::bytea[], $2::bigint[], $3::bytea[])
                        AS arriving (sha256, size, content)
                    ORDER BY sha256
                    ON CONFLICT DO NOTHING
                    """,
                binds: bindings), logger: logger)
    }

    /// Puts the stored inline content back into the assets of `records` (content that is a
    /// file of the asset store stays out), in one read; no read when they name none.
    static func fill(_ records: inout [Wire.Record], _ connection: PostgresConnection, _ logger: Logger) async throws {
        var checksums = Set<[UInt8]>()
        for record in records { checksums.formUnion(RecordCodec.assetChecksums(in: record)) }
        guard !checksums.isEmpty else { return }
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(checksums.map { ByteBuffer(bytes: $0) })
        // A row whose content is shorter than its size is a file of the asset store.
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT sha256, content FROM assets WHERE sha256 = ANY($1::bytea[]) AND length(content) = size
                    """,
                binds: bindings), logger: logger)
        var contents: [[UInt8]: [UInt8]] = [:]
        for try await (digest, content) in rows.decode((ByteBuffer, ByteBuffer).self) {
            contents[Array(buffer: digest)] = Array(buffer: content)
        }
        guard !contents.isEmpty else { return }
        for i in records.indices { RecordCodec.fillAssets(&records[i], from: contents) }
    }
}
