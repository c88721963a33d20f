import CirrusWire
import Foundation

extension CKRecord: NSSecureCoding {
    /// The key under which ``encodeSystemFields(with:)`` stores the system fields (a serialized
    /// `Wire.Record` without user fields), and the version of that format.
    static let systemFieldsKey = "CirrusRecordSystemFields"
    static let systemFieldsVersionKey = "CirrusRecordSystemFieldsVersion"
    static let systemFieldsVersion: Int64 = 1

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
    public func encodeSystemFields(with coder: NSCoder) {
        let wire = self.wireSystemFields(self.withState { $0 })
        coder.encode(Self.systemFieldsVersion, forKey: Self.systemFieldsVersionKey)
        coder.encode(Data(wire.serializedBytes()), forKey: Self.systemFieldsKey)
    }

    /// The key under which `encode(with:)` stores the whole record (a serialized `Wire.Record`
    /// with every field, assets by digest), and the file of each asset by its digest.
    private static let recordKey = "CirrusRecord"
    private static let assetFilesKey = "CirrusRecordAssetFiles"

    /// `NSSecureCoding`: a record decodes only as a record.
    public static var supportsSecureCoding: Bool { true }

    /// Writes the whole record to `coder` (`NSCoding`): its system fields, every field, and
    /// the changed keys; an asset is kept by its digest and the path of its file. Archive
    /// with `NSKeyedArchiver.archivedData(withRootObject:requiringSecureCoding:)`; keep only
    /// the system fields with ``encodeSystemFields(with:)``.
    ///
    /// An asset whose file cannot be read is left out of the archive; everything else is kept.
    public func encode(with coder: NSCoder) {
        self.encodeSystemFields(with: coder)
        var files: [String] = []
        let wire = try? self.wireRecord(changedKeysOnly: false) { (asset) throws(CKError) in
            let described = try asset.wireAsset(inlineContent: false)
            if let fileURL = asset.fileURL {
                files.append(described.sha256.map { String($0, radix: 16) }.joined(separator: ":") + "=" + fileURL.path)
            }
            return described
        }
        guard let wire else { return }
        coder.encode(Data(wire.serializedBytes()), forKey: Self.recordKey)
        coder.encode(files as NSArray, forKey: Self.assetFilesKey)
    }

    /// The wire record `coder` holds (with its fields when `encode(with:)` wrote it) and the
    /// asset files it names; nil when it holds none.
    static func decodedWire(from coder: NSCoder) -> (record: Wire.Record, assetFiles: [[UInt8]: URL])? {
        guard coder.containsValue(forKey: Self.systemFieldsKey),
            coder.decodeInt64(forKey: Self.systemFieldsVersionKey) == Self.systemFieldsVersion,
            let data = coder.decodeObject(of: NSData.self, forKey: Self.systemFieldsKey),
            var wire = try? Wire.Record(serializedBytes: [UInt8](data as Data))
        else {
            return nil
        }
        var assetFiles: [[UInt8]: URL] = [:]
        if coder.containsValue(forKey: Self.recordKey),
            let data = coder.decodeObject(of: NSData.self, forKey: Self.recordKey),
            let whole = try? Wire.Record(serializedBytes: [UInt8](data as Data))
        {
            wire = whole
            let files = coder.decodeObject(of: [NSArray.self, NSString.self], forKey: Self.assetFilesKey) as? [String] ?? []
            for entry in files {
                guard let separator = entry.firstIndex(of: "=") else { continue }
                let digest = entry[..<separator].split(separator: ":").compactMap { UInt8($0, radix: 16) }
                assetFiles[digest] = URL(fileURLWithPath: String(entry[entry.index(after: separator)...]))
            }
        } else {
            wire.fields = []
            wire.changedKeys = []
        }
        return (wire, assetFiles)
    }
}
