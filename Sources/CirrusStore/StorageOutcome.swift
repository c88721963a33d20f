public import CirrusWire

/// Why one item of a request failed; the other items of the request go on.
///
/// The store speaks in these, never in protocol error codes: the server maps
/// each onto the protocol error a client sees.
///
/// For example:
/// ```swift
/// let result = try await storage.modifyRecords(RecordModification(saving: [note]), in: key, by: "_alice")
/// if case .failure(let failure) = result.saves[0].result, failure.code == .serverRecordChanged {
///     merge(failure.serverRecord)
/// }
/// ```
public struct ItemFailure: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong with the item; a set of codes that can grow.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case unknownItem, zoneNotFound, serverRecordChanged, batchRequestFailed, invalidArguments
            case permissionFailure, assetFileNotFound, assetFileModified, limitExceeded, referenceViolation
            case quotaExceeded, internalError, serverRejectedRequest, alreadyShared, tooManyParticipants
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The record or subscription does not exist.
        public static let unknownItem = Code(.unknownItem)
        /// The item's zone does not exist (or belongs to another database).
        public static let zoneNotFound = Code(.zoneNotFound)
        /// The record changed on the server since the client read it; see ``ItemFailure/serverRecord``.
        public static let serverRecordChanged = Code(.serverRecordChanged)
        /// The item was fine, but another item of its atomic zone failed, so none was written.
        public static let batchRequestFailed = Code(.batchRequestFailed)
        /// The item is malformed (a bad name, field key, kind, or an item named twice).
        public static let invalidArguments = Code(.invalidArguments)
        /// The caller may not change this item (another user's record in the public database).
        public static let permissionFailure = Code(.permissionFailure)
        /// The record names an asset whose content the server does not have.
        public static let assetFileNotFound = Code(.assetFileNotFound)
        /// Inline asset content does not match its size or SHA-256.
        public static let assetFileModified = Code(.assetFileModified)
        /// The item would exceed a per-user limit (e.g. subscriptions per database).
        public static let limitExceeded = Code(.limitExceeded)
        /// The target of a `deleteSelf` reference is neither stored nor saved by the same request.
        public static let referenceViolation = Code(.referenceViolation)
        /// The item would take its user above their storage quota (asset bytes).
        public static let quotaExceeded = Code(.quotaExceeded)
        /// The server failed to handle the item (e.g. it could not write an asset file).
        public static let internalError = Code(.internalError)
        /// The server refuses the item where it is (a share in the public database or in a
        /// default zone).
        public static let serverRejectedRequest = Code(.serverRejectedRequest)
        /// The record is already the root of another share.
        public static let alreadyShared = Code(.alreadyShared)
        /// The share would have more participants than a share may have.
        public static let tooManyParticipants = Code(.tooManyParticipants)

        public var description: String { "\(base)" }
    }

    public var code: Code
    /// English, for logs and for the client's error message.
    public var message: String
    /// The records of a conflict, out of line: only `serverRecordChanged` has them, and two
    /// `Wire.Record`s inline would double the size of every save's outcome, failed or not.
    private var records: ConflictRecords?

    public init(_ code: Code, _ message: String, serverRecord: Wire.Record? = nil, clientRecord: Wire.Record? = nil) {
        self.code = code
        self.message = message
        self.records = ConflictRecords.of(server: serverRecord, client: clientRecord)
    }

    /// `serverRecordChanged`: the record as the server has it now (all fields, asset
    /// contents left out).
    public var serverRecord: Wire.Record? {
        get { records?.server }
        set { records = ConflictRecords.of(server: newValue, client: clientRecord) }
    }

    /// `serverRecordChanged`: the record the client tried to save.
    public var clientRecord: Wire.Record? {
        get { records?.client }
        set { records = ConflictRecords.of(server: serverRecord, client: newValue) }
    }

    public var description: String { "ItemFailure.\(code): \(message)" }
}

/// The server's and the client's record of a conflict; immutable, compared by content.
private final class ConflictRecords: Hashable, Sendable {
    let server: Wire.Record?
    let client: Wire.Record?

    private init(server: Wire.Record?, client: Wire.Record?) {
        self.server = server
        self.client = client
    }

    /// Nil when there is neither record, so a failure without them equals one that never had them.
    static func of(server: Wire.Record?, client: Wire.Record?) -> ConflictRecords? {
        server == nil && client == nil ? nil : ConflictRecords(server: server, client: client)
    }

    static func == (lhs: ConflictRecords, rhs: ConflictRecords) -> Bool {
        lhs === rhs || (lhs.server == rhs.server && lhs.client == rhs.client)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(server)
        hasher.combine(client)
    }
}

/// What became of one item of a request: its value as the store now has it, or why it failed.
///
/// `ID` is what the request named the item by (optional where a request may omit it, as a
/// record to save without a record ID).
public struct ItemOutcome<ID: Hashable & Sendable, Value: Hashable & Sendable>: Hashable, Sendable {
    public var id: ID
    public var result: Result<Value, ItemFailure>

    public init(id: ID, result: Result<Value, ItemFailure>) {
        self.id = id
        self.result = result
    }

    /// The value, when the item succeeded.
    public var value: Value? {
        if case .success(let value) = result { value } else { nil }
    }

    /// Why the item failed; nil when it succeeded.
    public var failure: ItemFailure? {
        if case .failure(let failure) = result { failure } else { nil }
    }
}

/// What became of one item to delete: `failure` nil = deleted (or, for records, never existed).
public struct ItemDeletion<ID: Hashable & Sendable>: Hashable, Sendable {
    public var id: ID
    public var failure: ItemFailure?

    public init(id: ID, failure: ItemFailure? = nil) {
        self.id = id
        self.failure = failure
    }
}

/// A record to save and the record as stored (system fields set), or its failure.
public typealias RecordSaveOutcome = ItemOutcome<Wire.RecordID?, Wire.Record>
/// A record to delete and whether it was.
public typealias RecordDeletion = ItemDeletion<Wire.RecordID>
/// A record asked for by ID and the record, or its failure (`unknownItem`, `zoneNotFound`).
public typealias RecordFetchOutcome = ItemOutcome<Wire.RecordID, Wire.Record>
/// A zone to save and the zone as stored, or its failure.
public typealias ZoneSaveOutcome = ItemOutcome<Wire.RecordZoneID?, Wire.RecordZone>
/// A zone to delete and whether it was.
public typealias ZoneDeletion = ItemDeletion<Wire.RecordZoneID>
/// A zone asked for by ID and the zone, or its failure (`zoneNotFound`).
public typealias ZoneFetchOutcome = ItemOutcome<Wire.RecordZoneID, Wire.RecordZone>
/// A subscription to save (by its ID) and the subscription as stored, or its failure.
public typealias SubscriptionSaveOutcome = ItemOutcome<String, Wire.Subscription>
/// A subscription to delete (by its ID) and whether it was.
public typealias SubscriptionDeletion = ItemDeletion<String>
/// A subscription asked for by ID and the subscription, or its failure (`unknownItem`).
public typealias SubscriptionFetchOutcome = ItemOutcome<String, Wire.Subscription>
