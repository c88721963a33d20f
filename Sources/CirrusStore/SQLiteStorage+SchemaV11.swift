import GRDB

extension SQLiteStorage {
    /// Schema v11: a tombstone knows which shares the record was in when it was deleted, so a
    /// participant's change feed lists only deletions of records shared with them (once a
    /// record is gone, so is its `parent` chain).
    ///
    /// - `tombstones.shared_by`: the record names of the shares the record was in, one per
    ///   line (record names are printable ASCII): `cloudkit.zoneshare` in a zone shared whole;
    ///   in a zone shared by hierarchy, the share of each root its parent chain reached (a share
    ///   record's own tombstone names itself). NULL when it was in no share.
    ///
    /// Tombstones kept before v11 are filled in where the answer is known without the deleted
    /// record: those of a zone shared whole now name its share (participants were shown every
    /// deletion there before); those of a zone shared by hierarchy stay NULL, never shown to
    /// participants (a participant may then keep a copy of a record deleted before the upgrade).
    static func migrateToV11(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE tombstones ADD COLUMN shared_by TEXT;
            UPDATE tombstones SET shared_by = s.name
                FROM shares s WHERE s.zone_id = tombstones.zone_id AND s.root_name IS NULL;
            """)
    }
}
