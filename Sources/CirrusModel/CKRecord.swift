import CirrusWire
import Foundation
import Synchronization

/// A collection of typed fields stored in a database (`CKRecord`).
///
/// An `NSObject` subclass with reference semantics, like Apple's: two records are equal only
/// when they are the same object. Fields are read and written by subscript with
/// `CKRecordValue` types; system fields (change tag, dates, creator) are filled by the server
/// and read-only here. `CKShare` is a subclass. A record archives with `NSSecureCoding`
/// (every field) or ``encodeSystemFields(with:)`` (system fields only).
///
/// For example:
/// ```swift
/// let note = CKRecord(recordType: "Note")
/// note["title"] = "Groceries"
/// note["done"] = false
/// let title = note["title"] as? String
/// ```
///
/// `@unchecked Sendable` is safe: every mutable property lives in `stateValue`, which is only
/// read or written through ``withState(_:)``, under `stateLock`; the rest is `let`.
open class CKRecord: NSObject, NSCopying, @unchecked Sendable, CKRecordKeyValueSetting {
    /// Everything about a record that can change, guarded by one lock.
    struct State {
        var fields: [FieldKey: FieldValue] = [:]
        var encryptedFields: [FieldKey: FieldValue] = [:]
        /// Keys set (including to nil) since creation or the last server copy, in order.
        var changedKeys: [FieldKey] = []
        var recordChangeTag: String?
        var creationDate: Date?
        var modificationDate: Date?
        var creatorUserRecordID: ID?
        var lastModifiedUserRecordID: ID?
        var parent: Reference?
        var share: Reference?

        /// Room made at a record's first field: a record usually has several, and growing its
        /// storage one field at a time reallocates it at the first, second and fourth.
        static let initialFieldCapacity = 8

        mutating func markChanged(_ key: FieldKey) {
            if changedKeys.contains(key) { return }
            if changedKeys.capacity == 0 { changedKeys.reserveCapacity(Self.initialFieldCapacity) }
            changedKeys.append(key)
        }
    }

    /// The record's unique identity.
    public let recordID: ID
    /// The app-defined type of the record, such as `"Note"`.
    public let recordType: RecordType
    /// Guards `stateValue`. Held inline rather than in a `Locked` box of its own: a record (the
    /// object a client makes and frees most) is then one allocation, not two, and every access
    /// one pointer chase shorter.
    private let stateLock = Mutex(())
    /// Unchecked: only reached through ``withState(_:)``, which holds `stateLock` for the whole
    /// access (a nested call on the same record would deadlock before it could overlap), so the
    /// runtime's own check of each access only costs time.
    @exclusivity(unchecked) private var stateValue: State

    /// A new record of the given type with the given ID.
    public init(recordType: RecordType, recordID: ID) {
        self.recordType = recordType
        self.recordID = recordID
        self.stateValue = State()
        super.init()
    }

    /// A new record with a unique name (a UUID string) in the given zone.
    public convenience init(recordType: RecordType, zoneID: CKRecordZone.ID) {
        self.init(recordType: recordType, recordID: ID(zoneID: zoneID))
    }

    /// A new record with a unique name (a UUID string) in the current user's default zone.
    public convenience init(recordType: RecordType) {
        self.init(recordType: recordType, recordID: ID(zoneID: .default))
    }

    /// A new record of the given type with the given ID and `fields` set in order, as setting
    /// each through the subscript would (a key given twice keeps its last value), but with
    /// no lock taken and storage sized once: an import makes a record per row this way.
    package convenience init(recordType: RecordType, recordID: ID, fields: [(FieldKey, any CKRecordValue)]) {
        var state = State()
        if !fields.isEmpty {
            state.fields = .init(minimumCapacity: fields.count)
            state.changedKeys.reserveCapacity(fields.count)
        }
        for (key, value) in fields {
            state.fields[key] = value._cirrusFieldValue.storage
            state.markChanged(key)
        }
        self.init(recordType: recordType, recordID: recordID, state: state)
    }

    init(recordType: RecordType, recordID: ID, state: consuming State) {
        self.recordType = recordType
        self.recordID = recordID
        self.stateValue = consume state
        super.init()
    }

    /// Runs `body` on the record's state under its lock: the only way to it.
    func withState<Result, Failure: Error>(_ body: (inout State) throws(Failure) -> Result) throws(Failure) -> Result {
        try stateLock.withLock { (_) throws(Failure) in try body(&stateValue) }
    }

    /// A record rebuilt from what ``encodeSystemFields(with:)`` wrote (its system fields, no
    /// fields of its own, nothing changed) or what `encode(with:)` wrote (the whole record).
    /// nil when `coder` holds no record, a later format, or bytes that do not decode. A share
    /// decodes as a share only through `CKShare(coder:)`.
    public required convenience init?(coder: NSCoder) {
        guard let wire = CKRecord.decodedWire(from: coder) else { return nil }
        do {
            try self.init(wire: wire.record, localAssetFiles: wire.assetFiles)
        } catch {
            return nil
        }
    }

    // MARK: System fields

    /// The server's version tag of the record; `nil` until the record is first saved.
    public var recordChangeTag: String? { withState { $0.recordChangeTag } }
    /// When the record was first saved to the server.
    public var creationDate: Date? { withState { $0.creationDate } }
    /// When the record was last saved to the server.
    public var modificationDate: Date? { withState { $0.modificationDate } }
    /// The user record ID of the record's creator.
    public var creatorUserRecordID: ID? { withState { $0.creatorUserRecordID } }
    /// The user record ID of the user who saved the record last.
    public var lastModifiedUserRecordID: ID? { withState { $0.lastModifiedUserRecordID } }
    /// The share this record is the root of, if it is shared; filled by the server.
    public var share: Reference? { withState { $0.share } }

    /// The record's parent, for sharing hierarchies (its action is always `.none`).
    public var parent: Reference? {
        get { withState { $0.parent } }
        set { withState { $0.parent = newValue.map { Reference(recordID: $0.recordID, action: .none) } } }
    }

    /// Makes `parentRecord` this record's parent, or removes the parent when `nil`.
    public func setParent(_ parentRecord: CKRecord?) {
        setParent(parentRecord?.recordID)
    }

    /// Makes the record with `parentID` this record's parent, or removes the parent when `nil`.
    public func setParent(_ parentID: ID?) {
        parent = parentID.map { Reference(recordID: $0, action: .none) }
    }

    /// The share-specific part of the record on the wire: nil for every record but a share.
    func wireShareFields() -> Wire.ShareFields? { nil }

    // MARK: Fields

    /// The value of the field `key`, or `nil`. Setting `nil` removes the field.
    ///
    /// Numbers read back as `NSNumber`: cast with `as? Int`, `as? Double`, `as? Bool` ….
    public subscript(key: FieldKey) -> (any CKRecordValue)? {
        get { withState { $0.fields[key]?.recordValue } }
        set { setStoredValue(newValue?._cirrusFieldValue.storage, forKey: key, encrypted: false) }
    }

    /// The value of the field `key` as `T`, or `nil` if absent or of another type.
    public subscript<T: CKRecordValueProtocol>(key: FieldKey) -> T? {
        get { withState { $0.fields[key]?.recordValue } as? T }
        set { setStoredValue(newValue?._cirrusFieldValue.storage, forKey: key, encrypted: false) }
    }

    /// The value of the field `key`, or `nil`.
    public func object(forKey key: FieldKey) -> (any CKRecordValue)? { self[key] }

    /// Sets the field `key`; `nil` removes it.
    public func setObject(_ object: (any CKRecordValue)?, forKey key: FieldKey) { self[key] = object }

    /// Key-value coding's spelling of the subscript setter: `record.setValue("x", forKey: "title")`.
    public func setValue(_ value: (any CKRecordValue)?, forKey key: FieldKey) { self[key] = value }

    /// Key-value coding's spelling of the subscript getter.
    public func value(forKey key: FieldKey) -> (any CKRecordValue)? { self[key] }

    /// The keys of every field that has a value (plain fields; see `encryptedValues`), sorted.
    public func allKeys() -> [FieldKey] {
        withState { $0.fields.keys.sorted() }
    }

    /// The keys set since the record was created or came from the server, in the order
    /// they were first set, including keys set to `nil` and encrypted keys.
    public func changedKeys() -> [FieldKey] {
        withState { $0.changedKeys }
    }

    /// Whether ``assetsToSend(changedKeysOnly:)`` has any: a field of the save holds an asset
    /// or an asset list. Checked for every record saved, without building the list.
    package func hasAssetsToSend(changedKeysOnly: Bool) -> Bool {
        withState { state in
            func isAsset(_ value: FieldValue) -> Bool {
                switch value {
                case .asset, .assetList: true
                default: false
                }
            }
            if changedKeysOnly {
                return state.changedKeys.contains { key in state.fields[key].map(isAsset) ?? false }
            }
            return state.fields.values.contains(where: isAsset)
        }
    }

    /// The assets of the plain fields a save sends, by key: the changed keys in the order they were
    /// first set, or every key sorted. What `self[key]` gives for each key, read under one lock
    /// without making a value of every field (a number is an `NSNumber` there) and casting it.
    package func assetsToSend(changedKeysOnly: Bool) -> [(key: FieldKey, assets: [CKAsset])] {
        withState { state in
            func assets(_ value: FieldValue?) -> [CKAsset]? {
                switch value {
                case .asset(let asset)?: [asset]
                case .assetList(let list)?: list
                default: nil
                }
            }
            if changedKeysOnly {
                return state.changedKeys.compactMap { key in assets(state.fields[key]).map { (key, $0) } }
            }
            return state.fields.compactMap { key, value in assets(value).map { (key, $0) } }.sorted { $0.key < $1.key }
        }
    }

    /// The record's encrypted fields (`CKRecord.encryptedValues`). Cirrus keeps them
    /// apart from plain fields and flags them on the wire; it does not encrypt them
    /// itself (TLS protects them in transit).
    public var encryptedValues: any CKRecordKeyValueSetting {
        EncryptedValues(record: self)
    }

    func setStoredValue(_ value: FieldValue?, forKey key: FieldKey, encrypted: Bool) {
        withState { state in
            // A key is in one of the two at most; most records have no encrypted field, and
            // removing from an empty dictionary still hashes the key.
            if encrypted {
                state.encryptedFields[key] = value
                if !state.fields.isEmpty { state.fields[key] = nil }
            } else {
                // A new dictionary rather than `reserveCapacity` on the empty one: the latter runs
                // unspecialized and looks up its storage's generic metadata at every call.
                if value != nil, state.fields.capacity == 0 { state.fields = .init(minimumCapacity: State.initialFieldCapacity) }
                state.fields[key] = value
                if !state.encryptedFields.isEmpty { state.encryptedFields[key] = nil }
            }
            state.markChanged(key)
        }
    }

    /// A new record with the same ID, type, system fields, fields and changed keys (`NSCopying`;
    /// `record.copy() as? CKRecord`). A share's copy is a `CKShare`.
    open func copy(with zone: NSZone? = nil) -> Any {
        CKRecord(recordType: recordType, recordID: recordID, state: withState { $0 })
    }

    open override var description: String {
        let (tag, keys) = withState { ($0.recordChangeTag, $0.fields.keys.sorted()) }
        return "<\(type(of: self)): recordType=\(recordType), recordID=\(recordID), recordChangeTag=\(tag ?? "nil"), keys=\(keys)>"
    }
}

/// Reading and writing a record's fields by key (`CKRecordKeyValueSetting`): a record
/// and its `encryptedValues` both conform.
public protocol CKRecordKeyValueSetting: AnyObject, Sendable {
    /// The value of the field `key`, or `nil`; setting `nil` removes the field.
    subscript(key: CKRecord.FieldKey) -> (any CKRecordValue)? { get set }
    /// The keys of every field that has a value.
    func allKeys() -> [CKRecord.FieldKey]
    /// The keys set since the record was created or came from the server.
    func changedKeys() -> [CKRecord.FieldKey]
}

extension CKRecordKeyValueSetting {
    /// The value of the field `key` as `T`, or `nil` if absent or of another type.
    public subscript<T: CKRecordValueProtocol>(key: CKRecord.FieldKey) -> T? {
        get { self[key] as? T }
        set { self[key] = newValue }
    }
}

/// The view of a record's encrypted fields.
final class EncryptedValues: CKRecordKeyValueSetting {
    let record: CKRecord
    init(record: CKRecord) { self.record = record }

    subscript(key: CKRecord.FieldKey) -> (any CKRecordValue)? {
        get { record.withState { $0.encryptedFields[key]?.recordValue } }
        set { record.setStoredValue(newValue?._cirrusFieldValue.storage, forKey: key, encrypted: true) }
    }

    func allKeys() -> [CKRecord.FieldKey] {
        record.withState { $0.encryptedFields.keys.sorted() }
    }

    func changedKeys() -> [CKRecord.FieldKey] {
        record.withState { state in state.changedKeys.filter { state.encryptedFields[$0] != nil } }
    }
}
