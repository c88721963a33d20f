import CirrusWire
import Foundation

extension CKRecord {
    /// The key under which ``encodeSystemFields(with:)`` stores the system fields (a serialized
    /// `Wire.Record` without user fields), and the version of that format.
    private static let systemFieldsKey = "CirrusRecordSystemFields"
    private static let systemFieldsVersionKey = "CirrusRecordSystemFieldsVersion"
    private static let systemFieldsVersion: Int64 = 1

    /// Writes the record's system fields to `coder`: its ID, type, change tag, dates, creator,
    /// last modifier, parent and share, and none of its own fields. The usual way to cache a
    /// record between launches: keep these and your own copy of the fields, then rebuild the
    /// record with ``init(coder:)`` to save changes against the change tag the server knows.
    ///
    /// For example:
    /// ```swift
    /// let archiver = NSKeyedArchiver(requiringSecureCoding: true)
    /// record.encodeSystemFields(with: archiver)
    /// archiver.finishEncoding()
    /// let data = archiver.encodedData
    ///
    /// let unarchiver = try NSKeyedUnarchiver(forReadingFrom: data)
    /// unarchiver.requiresSecureCoding = true
    /// let cached = CKRecord(coder: unarchiver)
    /// ```
    ///
    /// Unlike CloudKit's, a `CKRecord` here is not an `NSObject`: archive it with this method
    /// and ``init(coder:)`` (as above), not with `archivedData(withRootObject:)`.
    public func encodeSystemFields(with coder: NSCoder) {
        let wire = self.wireSystemFields(self.state.withLock { $0 })
        coder.encode(Self.systemFieldsVersion, forKey: Self.systemFieldsVersionKey)
        coder.encode(Data(wire.serializedBytes()), forKey: Self.systemFieldsKey)
    }

    /// A record rebuilt from what ``encodeSystemFields(with:)`` wrote: its system fields, no
    /// fields of its own, nothing changed. nil when `coder` holds no system fields, a later
    /// format, or bytes that do not decode.
    public convenience init?(coder: NSCoder) {
        guard coder.containsValue(forKey: Self.systemFieldsKey),
            coder.decodeInt64(forKey: Self.systemFieldsVersionKey) == Self.systemFieldsVersion,
            let data = coder.decodeObject(of: NSData.self, forKey: Self.systemFieldsKey),
            var wire = try? Wire.Record(serializedBytes: [UInt8](data as Data))
        else {
            return nil
        }
        wire.fields = []
        wire.changedKeys = []
        do {
            try self.init(wire: wire)
        } catch {
            return nil
        }
    }
}
