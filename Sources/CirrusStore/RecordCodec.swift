import CirrusWire
import Foundation

/// Pure transformations of `Wire.Record` values between the wire and the store.
package enum RecordCodec {
    package static let defaultZoneName = "_defaultZone"
    static let maxNameLength = 255

    package static func error(_ code: ItemFailure.Code, _ message: String) -> ItemFailure {
        ItemFailure(code, message)
    }

    /// Nil when `key` is a valid field name: an ASCII letter, then letters,
    /// digits and '_', at most 255 characters.
    static func checkFieldKey(_ key: String) -> ItemFailure? {
        // Read where the bytes lie: every field of every saved record comes through here.
        let valid = key.utf8.withContiguousStorageIfAvailable(isFieldKey) ?? Array(key.utf8).withUnsafeBufferPointer(isFieldKey)
        guard valid else {
            return error(.invalidArguments, "invalid field name \"\(key)\"")
        }
        return nil
    }

    /// 1 ... 255 ASCII letters, digits and underscores, starting with a letter.
    private static func isFieldKey(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let first = bytes.first, isLetter(first), bytes.count <= maxNameLength else { return false }
        for byte in bytes.dropFirst() where !(isLetter(byte) || (byte >= 0x30 && byte <= 0x39) || byte == 0x5F) {
            return false
        }
        return true
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
    }

    /// Nil when `name` may name a record (1 ... 255 printable ASCII characters)
    /// or a zone (1 ... 255 UTF-8 bytes, no control characters).
    package static func checkName(_ name: String, of what: String) -> ItemFailure? {
        // Read where the bytes lie: every saved record's name and zone name come through here.
        let isZone = what == "zone"
        let check = { (bytes: UnsafeBufferPointer<UInt8>) in isName(bytes, zone: isZone) }
        guard name.utf8.withContiguousStorageIfAvailable(check) ?? Array(name.utf8).withUnsafeBufferPointer(check) else {
            return error(.invalidArguments, "invalid \(what) name \"\(name)\"")
        }
        return nil
    }

    private static func isName(_ bytes: UnsafeBufferPointer<UInt8>, zone: Bool) -> Bool {
        guard !bytes.isEmpty, bytes.count <= maxNameLength else { return false }
        if zone {
            for byte in bytes where byte < 0x20 || byte == 0x7F { return false }
        } else {
            for byte in bytes where byte < 0x20 || byte >= 0x7F { return false }
        }
        return true
    }

    /// Checks what a client sent in a record to save (system fields are ignored), but for the
    /// record's name: the caller checked it first (``checkName(_:of:)``).
    static func checkRecordToSave(_ record: Wire.Record) -> ItemFailure? {
        guard let recordID = record.recordID else {
            return error(.invalidArguments, "record without a record ID")
        }
        guard !record.recordType.isEmpty, record.recordType.utf8.count <= maxNameLength else {
            return error(.invalidArguments, "record \(recordID.recordName) has an invalid record type")
        }
        let isShare = record.recordType == ShareRules.shareType
        for field in record.fields where !(isShare && ShareRules.systemFieldKeys.contains(field.key)) {
            if let failure = checkFieldKey(field.key) { return failure }
        }
        for key in record.changedKeys where !(isShare && ShareRules.systemFieldKeys.contains(key)) {
            if let failure = checkFieldKey(key) { return failure }
        }
        return nil
    }

    // MARK: - Fields

    static func hasValue(_ field: Wire.RecordField) -> Bool {
        // A switch, not `field.value?.kind != nil`: that compiles to `Optional`'s `==` of two
        // kinds, which copies the value (a retain of its payload) for every field looked at
        // (1.5 % of `cirrusd`'s CPU under 400-record saves, in ``merge(_:_:)``).
        switch field.value?.kind {
        case .none: false
        case .some: true
        }
    }

    /// `base` with `update` applied: later fields replace earlier ones with the
    /// same key; a nil value removes the key. Order: base order, then new keys.
    static func merge(_ base: [Wire.RecordField], _ updates: [Wire.RecordField]) -> [Wire.RecordField] {
        // A new record's few fields, each set once: the updates as they are, without hashing a key.
        if base.isEmpty, updates.count <= 16, updates.allSatisfy(hasValue),
            updates.indices.allSatisfy({ i in !updates[..<i].contains { $0.key == updates[i].key } })
        {
            return updates
        }
        var result = base
        var index: [String: Int] = [:]
        for (i, field) in result.enumerated() { index[field.key] = i }
        var removed = Set<String>()
        for field in updates {
            if let i = index[field.key] {
                result[i] = field
            } else {
                index[field.key] = result.count
                result.append(field)
            }
            if hasValue(field) { removed.remove(field.key) } else { removed.insert(field.key) }
        }
        return result.filter { hasValue($0) && !removed.contains($0.key) }
    }

    /// The fields a save writes, given the server's fields (nil = new record).
    package static func fieldsToStore(
        client: Wire.Record, server: [Wire.RecordField]?, policy: Wire.SavePolicy
    ) -> [Wire.RecordField] {
        switch policy {
        case .allKeys:
            return merge([], client.fields)
        case .changedKeys:
            let changed = Set(client.changedKeys)
            var updates = client.fields.filter { changed.contains($0.key) }
            let sent = Set(updates.map(\.key))
            for key in client.changedKeys where !sent.contains(key) {
                updates.append(Wire.RecordField(key: key))
            }
            return merge(server ?? [], updates)
        case .unspecified, .ifServerRecordUnchanged, .unrecognized:
            return merge(server ?? [], client.fields)
        }
    }

    /// Keeps only `desiredKeys` (nil = all fields; [] = none).
    package static func restrict(_ record: Wire.Record, to desiredKeys: [String]?) -> Wire.Record {
        guard let desiredKeys else { return record }
        let wanted = Set(desiredKeys)
        var record = record
        record.fields.removeAll { !wanted.contains($0.key) }
        return record
    }

    // MARK: - Assets

    /// Asset content arriving with a record to save: inline bytes, or content the
    /// server's file store holds (`content == nil`).
    package struct AssetContent: Sendable {
        package var sha256: [UInt8]
        package var size: UInt64
        /// The bytes, kept in SQLite; nil when the content is a file of the asset store.
        package var content: [UInt8]?
    }

    /// Moves inline asset content out of `record` (leaving checksum and size),
    /// verifying size and SHA-256. An asset whose upload handle is `RecordModification.fileContentHandle`
    /// names content the server's asset file store holds (its checksum and size are in the
    /// asset); any other upload handle is one the server did not resolve, and is refused.
    package static func extractAssets(_ record: inout Wire.Record) -> ItemResult<[AssetContent]> {
        var contents: [AssetContent] = []
        for i in record.fields.indices {
            guard let kind = record.fields[i].value?.kind else { continue }
            switch kind {
            case .assetValue(var asset):
                if let failure = extract(&asset, into: &contents) { return .failure(failure) }
                record.fields[i].value = Wire.FieldValue(kind: .assetValue(asset))
            case .assetList(var list):
                for j in list.values.indices {
                    if let failure = extract(&list.values[j], into: &contents) { return .failure(failure) }
                }
                record.fields[i].value = Wire.FieldValue(kind: .assetList(list))
            default:
                continue
            }
        }
        return .success(contents)
    }

    private static func extract(_ asset: inout Wire.Asset, into contents: inout [AssetContent]) -> ItemFailure? {
        switch asset.content {
        case .inlineData(let bytes):
            guard asset.size == UInt64(bytes.count) else {
                return error(.assetFileModified, "asset size \(asset.size) but \(bytes.count) bytes sent")
            }
            let digest = Wire.SHA256.hash(bytes)
            if asset.sha256.isEmpty {
                asset.sha256 = digest
            } else if asset.sha256 != digest {
                return error(.assetFileModified, "asset content does not match its SHA-256")
            }
            contents.append(AssetContent(sha256: digest, size: UInt64(bytes.count), content: bytes))
        case .uploadHandle(let handle):
            guard handle == RecordModification.fileContentHandle else {
                return error(.assetFileNotFound, "upload handle \(handle.prefix(16))… was not resolved by the server")
            }
            guard asset.sha256.count == 32 else {
                return error(.invalidArguments, "asset with an upload handle needs its 32-byte SHA-256")
            }
            contents.append(AssetContent(sha256: asset.sha256, size: asset.size, content: nil))
        case .downloadHandle, nil:
            guard asset.sha256.count == 32 else {
                return error(.invalidArguments, "asset without content needs its 32-byte SHA-256")
            }
        }
        asset.content = nil
        return nil
    }

    /// Of the checksums a record to save names (``assetChecksums(in:)``), those the storage
    /// must know already: all but the contents arriving with it or, `arrived`, with an
    /// earlier save of the request.
    package static func checksumsToFind(
        _ checksums: Set<[UInt8]>, arriving: [AssetContent], arrived: Set<[UInt8]> = []
    ) -> Set<[UInt8]> {
        checksums.subtracting(arriving.map(\.sha256)).subtracting(arrived)
    }

    /// The failure of a save naming asset content the storage does not know.
    package static func unknownAsset(in name: String) -> ItemFailure {
        error(.assetFileNotFound, "record \(name) names an asset the server does not have")
    }

    /// Every checksum of an asset value in `record` that lacks content.
    package static func assetChecksums(in record: Wire.Record) -> Set<[UInt8]> {
        var result = Set<[UInt8]>()
        for field in record.fields {
            switch field.value?.kind {
            case .assetValue(let asset) where asset.content == nil && !asset.sha256.isEmpty:
                result.insert(asset.sha256)
            case .assetList(let list):
                for asset in list.values where asset.content == nil && !asset.sha256.isEmpty {
                    result.insert(asset.sha256)
                }
            default:
                continue
            }
        }
        return result
    }

    /// Puts stored content back into the record's assets.
    package static func fillAssets(_ record: inout Wire.Record, from contents: [[UInt8]: [UInt8]]) {
        func fill(_ asset: inout Wire.Asset) {
            if asset.content == nil, let bytes = contents[asset.sha256] { asset.content = .inlineData(bytes) }
        }
        for i in record.fields.indices {
            switch record.fields[i].value?.kind {
            case .assetValue(var asset):
                fill(&asset)
                record.fields[i].value = Wire.FieldValue(kind: .assetValue(asset))
            case .assetList(var list):
                for j in list.values.indices { fill(&list.values[j]) }
                record.fields[i].value = Wire.FieldValue(kind: .assetList(list))
            default:
                continue
            }
        }
    }

    // MARK: - References

    /// (zone name, record name) of every deleteSelf reference in `record`;
    /// a reference without a zone points into the record's own zone.
    /// Refuses a record whose parent or a reference names a record of another zone: CloudKit
    /// links records within one zone only (`records.proto`). A reference without a zone names
    /// one of the record's own zone.
    static func checkLinksStayInZone(_ record: Wire.Record, zoneName: String, in key: DatabaseKey) -> ItemFailure? {
        let name = record.recordID?.recordName ?? ""
        func outside(_ target: Wire.RecordID?) -> Bool {
            guard let zoneID = target?.zoneID else { return false }
            guard case .success(let targetZone) = ZoneResolution.zoneName(of: zoneID, in: key) else { return true }
            return targetZone != zoneName
        }
        if outside(record.parent?.recordID) {
            return error(.invalidArguments, "record \(name): its parent is in another zone; a parent must be in the record's zone")
        }
        for field in record.fields {
            let targets: [Wire.RecordID?]
            switch field.value?.kind {
            case .referenceValue(let reference): targets = [reference.recordID]
            case .referenceList(let list): targets = list.values.map(\.recordID)
            default: continue
            }
            if targets.contains(where: outside) {
                return error(
                    .invalidArguments,
                    "record \(name): field \(field.key) references a record in another zone; a reference's target must be in the record's zone")
            }
        }
        return nil
    }

    package static func deleteSelfTargets(of record: Wire.Record, zoneName: String) -> [(zone: String, name: String)] {
        var targets: [(zone: String, name: String)] = []
        func add(_ reference: Wire.Reference) {
            guard reference.action == .deleteSelf, let target = reference.recordID else { return }
            targets.append((target.zoneID?.zoneName ?? zoneName, target.recordName))
        }
        for field in record.fields {
            switch field.value?.kind {
            case .referenceValue(let reference): add(reference)
            case .referenceList(let list): list.values.forEach(add)
            default: continue
            }
        }
        return targets
    }
}

/// The outcome of one item: a value, or why it failed.
package typealias ItemResult<Value> = Result<Value, ItemFailure>
