import CirrusWire

/// The `Users` records of the public database: in its default zone, a record whose name is a
/// user record name (`_alice`) is that user's record. Only that user may save it, only as a
/// `Users` record, and nobody deletes it — whether it exists or not, so a refusal says nothing
/// about another user.
extension RecordWriter {
    /// The record type of a user's record.
    static let userRecordType = "Users"

    func isUserRecordName(_ name: String, in zone: ZoneRow) -> Bool {
        key.scope == .public && name.hasPrefix("_") && zone.name == "_defaultZone"
    }

    /// Why `user` may not save `name` as a `recordType` in `zone`, or nil when they may (as far
    /// as the Users records go).
    func userRecordRefusal(_ name: String, in zone: ZoneRow, recordType: String) -> ItemFailure? {
        guard isUserRecordName(name, in: zone) else { return nil }
        guard name == user else {
            return RecordCodec.error(.permissionFailure, "only user \(name) may write the Users record \(name)")
        }
        guard recordType == Self.userRecordType else {
            return RecordCodec.error(
                .invalidArguments, "the record \(name) is a \(Self.userRecordType) record, not a \(recordType)")
        }
        return nil
    }
}
