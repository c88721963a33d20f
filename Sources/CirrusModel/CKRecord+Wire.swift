import CirrusWire
import Foundation

extension CKRecord {
    /// A record from a wire message, as the server sent it: system fields set, no
    /// changed keys.
    ///
    /// What is accepted and what is refused:
    /// - a missing record ID, an empty record name or zone name, an empty record type,
    ///   a reference (field, list element, parent or share) without a valid target, and
    ///   asset content that does not match its size or checksum throw;
    /// - a field with no value, or with a value kind this version does not know (the
    ///   decoder cannot tell the two apart), is absent from the record, as the protocol
    ///   says; a field with an empty key is skipped; when a key repeats, the last wins;
    /// - lists are typed on the wire, so a list never mixes types;
    /// - `changed_keys` are ignored, and so are share fields (``decoded(wire:fields:assetDirectory:localAssetFiles:)``
    ///   makes a `CKShare` of a share).
    ///
    /// Inline asset content is written to files in `assetDirectory`
    /// (nil = `CKAsset.defaultContentDirectory`); see `CKAsset(wire:contentDirectory:)`.
    /// An asset without inline content gets the file `localAssetFiles` names for its SHA-256
    /// (the file it was uploaded from), or the one already downloaded into `assetDirectory`.
    ///
    /// - throws: `CKError` (`.invalidArguments`, `.assetFileModified`, `.internalError`).
    package convenience init(
        wire: Wire.Record, fields: [Wire.RecordField]? = nil, sentValues: SentFieldValues? = nil, knownID: ID? = nil,
        knownUserID: ID? = nil, assetDirectory: URL? = nil, localAssetFiles: [[UInt8]: URL] = [:]
    ) throws(CKError) {
        // Taken apart at once, so each part moves into the record: reading them off a named tuple
        // copied the whole tuple, a retain and a release for every field of the state.
        let (recordType, recordID, state) = try Self.decodedParts(
            of: wire, fields: fields, sentValues: sentValues, knownID: knownID, knownUserID: knownUserID,
            assetDirectory: assetDirectory, localAssetFiles: localAssetFiles)
        self.init(recordType: recordType, recordID: recordID, state: state)
    }

    /// The record a wire message carries: a ``CKShare`` when it is a share (record type
    /// `cloudkit.share`), otherwise a plain record, as ``init(wire:fields:assetDirectory:localAssetFiles:)``
    /// decodes it.
    ///
    /// `fields`, when given, are the record's fields in place of `wire.fields` (a saved record the
    /// server sent back without the fields the client sent, `fields_as_sent`): decoded as they
    /// are, without a copy of the message to put them in; `sentValues`, when given, are the
    /// values those fields were encoded from, taken as they are instead of decoded again.
    /// `knownID`, when the message names it, is the record's ID (the ID object the caller
    /// already has for the record it sent), instead of a new one read from the message;
    /// `knownUserID` likewise for its creator (the one of the record decoded before it, as a
    /// rule the same user).
    ///
    /// - throws: `CKError` (`.invalidArguments`, `.assetFileModified`, `.internalError`).
    package static func decoded(
        wire: Wire.Record, fields: [Wire.RecordField]? = nil, sentValues: SentFieldValues? = nil, knownID: ID? = nil,
        knownUserID: ID? = nil, assetDirectory: URL? = nil, localAssetFiles: [[UInt8]: URL] = [:]
    ) throws(CKError) -> CKRecord {
        if wire.recordType == SystemType.share {
            return try CKShare(
                shareRecord: wire, fields: fields, sentValues: sentValues, knownID: knownID, knownUserID: knownUserID,
                assetDirectory: assetDirectory, localAssetFiles: localAssetFiles)
        }
        return try CKRecord(
            wire: wire, fields: fields, sentValues: sentValues, knownID: knownID, knownUserID: knownUserID,
            assetDirectory: assetDirectory, localAssetFiles: localAssetFiles)
    }

    /// The type, ID and state a wire message carries (see ``init(wire:fields:assetDirectory:localAssetFiles:)``),
    /// with `fields` (when given) in place of `wire.fields`.
    static func decodedParts(
        of wire: Wire.Record, fields wireFields: [Wire.RecordField]? = nil, sentValues: SentFieldValues? = nil,
        knownID: ID? = nil, knownUserID: ID? = nil, assetDirectory: URL?, localAssetFiles: [[UInt8]: URL]
    ) throws(CKError) -> (recordType: RecordType, recordID: ID, state: State) {
        guard let wireID = wire.recordID else {
            throw CKError(.invalidArguments, message: "invalid record from the wire: no record ID")
        }
        let recordID: ID
        if let knownID, knownID.isNamed(by: wireID) {
            recordID = knownID
        } else {
            recordID = try ID(wire: wireID)
        }
        guard !wire.recordType.isEmpty else {
            throw CKError(.invalidArguments, message: "invalid record \(recordID.recordName) from the wire: empty record type")
        }
        var fields: [FieldKey: FieldValue] = [:]
        var encryptedFields: [FieldKey: FieldValue] = [:]
        if let sentValues {
            // The values `fields` were encoded from, which decode back as themselves. (Kept as
            // they are: reserving capacity would copy the dictionaries the sent record shares.)
            fields = sentValues.fields
            encryptedFields = sentValues.encryptedFields
        } else {
            let wireFields = wireFields ?? wire.fields
            fields = .init(minimumCapacity: wireFields.count)
            for field in wireFields where !field.key.isEmpty {
                guard let kind = field.value?.kind else {
                    fields[field.key] = nil
                    encryptedFields[field.key] = nil
                    continue
                }
                let value: FieldValue
                do {
                    value = try FieldValue(wire: kind, assetDirectory: assetDirectory, localAssetFiles: localAssetFiles)
                } catch {
                    throw CKError(
                        error.code,
                        message: "invalid field \"\(field.key)\" of record \(recordID.recordName): \(error.message ?? "")")
                }
                // A key repeated as the other kind replaces it (removing from an empty
                // dictionary, the usual case, would still hash the key).
                if field.isEncrypted {
                    encryptedFields[field.key] = value
                    if !fields.isEmpty { fields[field.key] = nil }
                } else {
                    fields[field.key] = value
                    if !encryptedFields.isEmpty { encryptedFields[field.key] = nil }
                }
            }
        }
        let creator = try wire.creatorUserRecordID.map { (id) throws(CKError) in
            if let knownUserID, knownUserID.isNamed(by: id) { return knownUserID }
            return try ID(wire: id)
        }
        // Usually one user created and last changed a record: one ID object for both (IDs are
        // immutable).
        let lastModifier =
            wire.lastModifiedUserRecordID == wire.creatorUserRecordID
            ? creator : try wire.lastModifiedUserRecordID.map { (id) throws(CKError) in try ID(wire: id) }
        let parent = try wire.parent.map { (parent) throws(CKError) in
            Reference(recordID: try Reference(wire: parent).recordID, action: .none)
        }
        let share = try wire.share.map { (share) throws(CKError) in try Reference(wire: share) }
        // Made where it is returned, so it moves out: a state built in a variable was copied
        // (a retain and a release of each of its parts).
        let state = State(
            fields: fields, encryptedFields: encryptedFields,
            recordChangeTag: wire.recordChangeTag.isEmpty ? nil : wire.recordChangeTag,
            creationDate: wire.creationDate.map(Date.init(wireTimestamp:)),
            modificationDate: wire.modificationDate.map(Date.init(wireTimestamp:)),
            creatorUserRecordID: creator, lastModifiedUserRecordID: lastModifier, parent: parent, share: share)
        return (wire.recordType, recordID, state)
    }

    /// The record as a wire message with every field, its changed keys, and asset
    /// content read from the assets' files and sent inline.
    ///
    /// - throws: `CKError` `.assetFileNotFound` if an asset's file cannot be read;
    ///   `.invalidArguments` if a name, key or string value contains U+0000 (the wire
    ///   layer would silently cut it short).
    package var wireRecord: Wire.Record {
        get throws(CKError) {
            try wireRecord(changedKeysOnly: false) { (asset) throws(CKError) in try asset.wireAsset(inlineContent: true) }
        }
    }

    /// The record as a wire message.
    ///
    /// - parameter changedKeysOnly: send only the fields in `changedKeys()` (for the
    ///   `changedKeys` save policy); otherwise every field.
    /// - parameter encodeAsset: turns each asset into its wire form, for example
    ///   `asset.wireAsset(inlineContent: false)` plus an upload handle for large files.
    /// - throws: `CKError`, whatever `encodeAsset` throws.
    package func wireRecord(
        changedKeysOnly: Bool,
        encodeAsset: (CKAsset) throws(CKError) -> Wire.Asset
    ) throws(CKError) -> Wire.Record {
        try self.wireRecordForSave(changedKeysOnly: changedKeysOnly, withChangedKeys: true, encodeAsset: encodeAsset).record
    }

    /// The record as a save sends it (see ``wireRecord(changedKeysOnly:encodeAsset:)``) and,
    /// when the message carries every field of the record and each one decodes back to the
    /// very same value, those values (see ``SentFieldValues``).
    ///
    /// A save sends the record's changed keys only with `changedKeysOnly` (the `changedKeys`
    /// save policy, the only one that reads them); `withChangedKeys` sends them anyway.
    package func wireRecordForSave(
        changedKeysOnly: Bool,
        withChangedKeys: Bool = false,
        encodeAsset: (CKAsset) throws(CKError) -> Wire.Asset
    ) throws(CKError) -> (record: Wire.Record, sent: SentFieldValues?) {
        let withChangedKeys = withChangedKeys || changedKeysOnly
        // Made under the record's lock, from its state in place: a copy of the state retains and
        // releases each of its parts. Until an asset comes up: assets are encoded (perhaps read
        // from their files) outside the lock, from a copy, by a second pass.
        var hasAsset = false
        do throws(CKError) {
            return try self.withState { (state) throws(CKError) in
                try self.wireRecordForSave(state, changedKeysOnly: changedKeysOnly, withChangedKeys: withChangedKeys) {
                    (_) throws(CKError) in
                    hasAsset = true
                    throw CKError(.internalError, message: "an asset is encoded outside the record's lock")
                }
            }
        } catch where hasAsset {
            let state = self.withState { $0 }
            return try self.wireRecordForSave(
                state, changedKeysOnly: changedKeysOnly, withChangedKeys: withChangedKeys, encodeAsset: encodeAsset)
        }
    }

    private func wireRecordForSave(
        _ state: borrowing State, changedKeysOnly: Bool, withChangedKeys: Bool,
        encodeAsset: (CKAsset) throws(CKError) -> Wire.Asset
    ) throws(CKError) -> (record: Wire.Record, sent: SentFieldValues?) {
        try FieldValue.checkWireID(recordID)
        try FieldValue.checkWireString(recordType, what: "the record type")
        if let parent = state.parent { try FieldValue.checkWireID(parent.recordID) }
        var fields: [Wire.RecordField] = []
        fields.reserveCapacity(state.fields.count + state.encryptedFields.count)
        let changed: Set<CKRecord.FieldKey>? = changedKeysOnly ? Set(state.changedKeys) : nil
        var keepsValues = true
        func add(_ values: [CKRecord.FieldKey: FieldValue], encrypted: Bool) throws(CKError) {
            if values.isEmpty { return }
            for key in values.keys.sorted() {
                guard let value = values[key] else { continue }
                guard changed?.contains(key) ?? true else {
                    keepsValues = false
                    continue
                }
                try FieldValue.checkWireString(key, what: "the field key \"\(key.debugDescription)\"")
                let kind = try value.wireKind(encodeAsset: encodeAsset)
                keepsValues = keepsValues && !key.isEmpty && value.decodesBackAsItself
                fields.append(Wire.RecordField(key: key, value: Wire.FieldValue(kind: kind), isEncrypted: encrypted))
            }
        }
        try add(state.fields, encrypted: false)
        try add(state.encryptedFields, encrypted: true)
        if keepsValues, !state.encryptedFields.isEmpty {
            // A key both plain and encrypted decodes as one of the two.
            keepsValues = state.encryptedFields.keys.allSatisfy { state.fields[$0] == nil }
        }
        var record = self.wireSystemFields(state)
        record.fields = fields
        if withChangedKeys { record.changedKeys = state.changedKeys }
        let sent = keepsValues ? SentFieldValues(fields: state.fields, encryptedFields: state.encryptedFields) : nil
        return (record, sent)
    }

    /// The record's ID, type and system fields (change tag, dates, creator, last modifier,
    /// parent, share) as a wire message without fields.
    func wireSystemFields(_ state: State) -> Wire.Record {
        Wire.Record(
            recordID: recordID.wireRecordID,
            recordType: recordType,
            recordChangeTag: state.recordChangeTag ?? "",
            creationDate: state.creationDate?.wireTimestamp,
            modificationDate: state.modificationDate?.wireTimestamp,
            creatorUserRecordID: state.creatorUserRecordID?.wireRecordID,
            lastModifiedUserRecordID: state.lastModifiedUserRecordID?.wireRecordID,
            parent: state.parent?.wireReference,
            share: state.share?.wireReference,
            shareFields: self.wireShareFields())
    }
}

/// A record's field values as a save sent them: every field of the record, each of a kind that
/// decodes back from the wire as the very same value (strings, numbers, bytes, their lists, and
/// dates whose wire timestamp is exact). When the server sends the saved record back without
/// its fields (`fields_as_sent`), the record takes these values instead of decoding again what
/// was just encoded. Values that would come back otherwise (references, locations, assets,
/// dates finer than a nanosecond) leave it out, and the record is decoded.
package struct SentFieldValues: Sendable {
    let fields: [CKRecord.FieldKey: FieldValue]
    let encryptedFields: [CKRecord.FieldKey: FieldValue]
}

extension FieldValue {
    /// Whether the value decodes from its wire form as itself (see ``SentFieldValues``).
    var decodesBackAsItself: Bool {
        switch self {
        case .string, .int64, .double, .bytes, .stringList, .int64List, .doubleList, .bytesList:
            true
        case .date(let date):
            Date(wireTimestamp: date.wireTimestamp) == date
        case .dateList(let dates):
            dates.allSatisfy { Date(wireTimestamp: $0.wireTimestamp) == $0 }
        case .reference, .location, .asset, .referenceList, .locationList, .assetList:
            false
        }
    }
}
