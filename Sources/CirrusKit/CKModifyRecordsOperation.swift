import CirrusModel
import CirrusWire
import Foundation
import NIOConcurrencyHelpers
import Synchronization

/// Saves and deletes records (CloudKit's `CKModifyRecordsOperation`).
///
/// For example:
/// ```swift
/// let operation = CKModifyRecordsOperation(recordsToSave: [note], recordIDsToDelete: [oldID])
/// operation.perRecordSaveBlock = { id, result in print(id, result) }
/// operation.modifyRecordsResultBlock = { result in print(result) }
/// database.add(operation)
/// ```
open class CKModifyRecordsOperation: CKDatabaseOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation — properties are set before start, blocks run on the
    // serial callback queue.

    /// What to do when the server's copy changed since the record was fetched.
    public enum RecordSavePolicy: Int, Sendable, Hashable {
        /// Fail with `serverRecordChanged` if the server's record changed (the default).
        case ifServerRecordUnchanged = 0
        /// Write only the keys changed locally, whatever the server has.
        case changedKeys = 1
        /// Replace every key, whatever the server has.
        case allKeys = 2

        var wire: Wire.SavePolicy {
            switch self {
            case .ifServerRecordUnchanged: .ifServerRecordUnchanged
            case .changedKeys: .changedKeys
            case .allKeys: .allKeys
            }
        }
    }

    /// The records to save.
    open var recordsToSave: [CKRecord]?
    /// The IDs of the records to delete.
    open var recordIDsToDelete: [CKRecord.ID]?
    /// How conflicts with the server's copy are handled. Default: `.ifServerRecordUnchanged`.
    open var savePolicy: RecordSavePolicy = .ifServerRecordUnchanged
    /// An opaque token saved with the zones this operation changes.
    open var clientChangeTokenData: Data?
    /// All or nothing per zone. Default: true.
    open var isAtomic: Bool = true

    /// Cirrus: whether the server reports every record saved or deleted (true), or only the
    /// items that fail (false). With false, `perRecordSaveBlock`, `perRecordDeleteBlock` and
    /// `perRecordCompletionBlock` see only failures, `modifyRecordsCompletionBlock` no saved
    /// record, and every item without a failure was saved or deleted; `modifyRecordsResultBlock`
    /// lists the failures in `partialFailure` as always. Neither end then encodes, sends,
    /// journals or decodes a record nobody looks at: for bulk writes (`cirrus import`) that
    /// is most of the work.
    ///
    /// Nil, the default: failures only when the operation is not long-lived and none of those
    /// four blocks is set when it starts; every item otherwise (a long-lived operation's
    /// fetched copy may set blocks later). A fetched long-lived operation reports what its
    /// request asked for.
    open var reportsSuccessfulItems: Bool?

    /// Upload progress of one record (0.0 … 1.0).
    open var perRecordProgressBlock: ((CKRecord, Double) -> Void)?
    /// One record saved (the server's copy) or not.
    open var perRecordSaveBlock: ((CKRecord.ID, Result<CKRecord, any Error>) -> Void)?
    /// One record deleted or not.
    open var perRecordDeleteBlock: ((CKRecord.ID, Result<Void, any Error>) -> Void)?
    /// The whole operation's outcome; `partialFailure` lists the failed items.
    open var modifyRecordsResultBlock: ((Result<Void, any Error>) -> Void)?

    /// Deprecated in CloudKit (use `perRecordSaveBlock`): one record saved, or its error.
    open var perRecordCompletionBlock: ((CKRecord, (any Error)?) -> Void)?
    /// Deprecated in CloudKit (use `modifyRecordsResultBlock`): the saved records, the deleted
    /// IDs and the operation's error.
    open var modifyRecordsCompletionBlock: (([CKRecord]?, [CKRecord.ID]?, (any Error)?) -> Void)?
    /// What `modifyRecordsCompletionBlock` gets; kept only for an operation that has one.
    private var savedRecords: [CKRecord] = []
    private var deletedRecordIDs: [CKRecord.ID] = []

    public override init() {
        super.init()
    }

    public convenience init(recordsToSave: [CKRecord]? = nil, recordIDsToDelete: [CKRecord.ID]? = nil) {
        self.init()
        self.recordsToSave = recordsToSave
        self.recordIDsToDelete = recordIDsToDelete
    }

    /// Records being saved, in request order: for the progress block, and the fields each was
    /// sent with (a saved record the server sends back without them, `fields_as_sent`, has
    /// these): the values they were encoded from when those decode back as themselves, else
    /// the wire fields (empty where the values are kept: the reply never reads them then, and
    /// reaching for each record's array again, long after it was made, cost a cache miss).
    /// Three arrays, not one of tuples: reading one part of a tuple element copied all three.
    private var sent: [CKRecord] = []
    private var sentFields: [[Wire.RecordField]] = []
    private var sentValues: [SentFieldValues?] = []
    /// The index in ``sent`` of each record by ID.
    private var sentIndex: [CKRecord.ID: Int] = [:]
    /// The index in ``sent`` of the record the next save event should name: the server reports
    /// saves in request order, so an event's record is found without a new ID object or a
    /// lookup by ID (see ``savedIndex(_:)``).
    private var nextSave = 0
    /// The creator of the last saved record decoded, for the next one (see
    /// `CKRecord.decoded(wire:fields:sentValues:knownID:knownUserID:…)`).
    private var lastCreator: CKRecord.ID?
    /// How the records' asset files travel, once uploaded (see ``prepareToStart(_:)``).
    private let assetPlan = Mutex<AssetUploadPlan?>(nil)
    /// The uploads running before the request is sent.
    private let uploadTask = Mutex<Task<Void, Never>?>(nil)

    /// Uploads the asset files that do not fit inline in the request, then starts it.
    override func prepareToStart(_ done: @escaping @Sendable ((any Error)?) -> Void) {
        let records = self.recordsToSave ?? []
        let changedKeysOnly = self.savePolicy == .changedKeys
        // Without assets there is nothing to read or upload: the request goes out now, not after
        // a task's hop to another thread (most saves).
        if !records.contains(where: { $0.hasAssetsToSend(changedKeysOnly: changedKeysOnly) }) {
            done(nil)
            return
        }
        let (container, scope) = self.target()
        let transfer = AssetTransfer(container: container, scope: scope)
        let task = Task {
            do throws(CKError) {
                let plan = try AssetUploadPlan(records: records, changedKeysOnly: changedKeysOnly)
                let uploaded = try await self.uploadAssets(plan, records: records, transfer: transfer)
                self.assetPlan.withLock { $0 = uploaded }
                done(nil)
            } catch {
                done(error)
            }
        }
        self.uploadTask.withLock { $0 = task }
    }

    open override func cancel() {
        self.uploadTask.withLock { $0 }?.cancel()
        super.cancel()
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        var unused = Wire.EncodedRecords()
        return try self.makeRequest(maximumItems: maximumItems, writing: false, into: &unused)
    }

    /// The request with its records written straight from the records where they can be (see
    /// `CKRecord.writeForSave(changedKeysOnly:to:)`), the others packed as before, all in order.
    override func makeRequestToSend(maximumItems: Int) throws -> (request: Wire.Open.Request, recordsToSave: Wire.EncodedRecords?) {
        var written = Wire.EncodedRecords()
        let request = try self.makeRequest(maximumItems: maximumItems, writing: true, into: &written)
        // A request that saves nothing is sent as it is.
        return (request, written.count == 0 ? nil : written)
    }

    /// The request; `writing`, its records to save go to `written` (in order) instead of into it.
    private func makeRequest(
        maximumItems: Int, writing: Bool, into written: inout Wire.EncodedRecords
    ) throws -> Wire.Open.Request {
        let records = self.recordsToSave ?? []
        let deletions = self.recordIDsToDelete ?? []
        // A long-lived modify may carry any number of items: the server runs it in chunks of
        // at most 400, each journaled with its writes (the frame size still bounds it).
        guard self.resolvedConfiguration.isLongLived || records.count + deletions.count <= maximumItems else {
            throw CKError(
                .limitExceeded,
                message: "\(records.count + deletions.count) items in one operation; at most \(maximumItems) are allowed"
            )
        }
        var sentFields: [[Wire.RecordField]] = []
        sentFields.reserveCapacity(records.count)
        var sentValues: [SentFieldValues?] = []
        sentValues.reserveCapacity(records.count)
        var sentIndex: [CKRecord.ID: Int] = [:]
        sentIndex.reserveCapacity(records.count)
        var wireRecords: [Wire.Record] = []
        if writing {
            // Most records of a save are a few hundred bytes at most: room for that many.
            written.reserveCapacity(records.count * 256)
        } else {
            wireRecords.reserveCapacity(records.count)
        }
        let plan = self.assetPlan.withLock { $0 }
        let resuming = self.resumedOpen != nil
        let changedKeysOnly = self.savePolicy == .changedKeys
        for record in records {
            guard sentIndex.updateValue(sentValues.count, forKey: record.recordID) == nil else {
                throw CKError(.invalidArguments, message: "record \(record.recordID) is saved twice in one operation")
            }
            if writing, let values = record.writeForSave(changedKeysOnly: changedKeysOnly, to: &written) {
                sentFields.append([])
                sentValues.append(values)
                continue
            }
            let (wire, values) = try record.wireRecordForSave(changedKeysOnly: changedKeysOnly) {
                (asset) throws(CKError) in
                // A fetched long-lived operation resumes the server's request: nothing is read.
                if resuming { return Wire.Asset() }
                if let plan { return try plan.wireAsset(asset) }
                return try asset.wireAsset(inlineContent: true)
            }
            sentFields.append(values == nil ? wire.fields : [])
            sentValues.append(values)
            if writing {
                written.append(wire)
            } else {
                wireRecords.append(wire)
            }
        }
        self.sent = records
        self.sentFields = sentFields
        self.sentValues = sentValues
        self.sentIndex = sentIndex
        self.nextSave = 0
        return .modifyRecords(
            Wire.ModifyRecordsRequest(
                recordsToSave: wireRecords,
                recordIDsToDelete: deletions.map(\.wireRecordID),
                savePolicy: self.savePolicy.wire,
                clientChangeToken: self.clientChangeTokenData.map { Array($0) } ?? [],
                isAtomic: self.isAtomic,
                failuresOnly: !self.successfulItemsAreReported,
                omitFieldsAsSent: true
            )
        )
    }

    /// Whether the request asks for every item's event (see ``reportsSuccessfulItems``).
    var successfulItemsAreReported: Bool {
        if let reportsSuccessfulItems { return reportsSuccessfulItems }
        return self.resolvedConfiguration.isLongLived || self.perRecordSaveBlock != nil || self.perRecordDeleteBlock != nil
            || self.perRecordCompletionBlock != nil || self.modifyRecordsCompletionBlock != nil
    }

    override func handle(event: Wire.Event) {
        guard case .modifyRecords(let payload) = event.payload else { return }
        switch payload.callback {
        case .perRecordProgress(let progress):
            guard let wireID = progress.recordID, let id = try? CKRecord.ID(wire: wireID),
                let record = self.sentIndex[id].map({ self.sent[$0] })
            else { return }
            self.perRecordProgressBlock?(record, progress.progress)
        case .perRecordSave(let save):
            guard let wireID = save.recordID, let (id, index) = self.savedIndex(wireID) else { return }
            let result: Result<CKRecord, any Error>
            switch save.outcome {
            case .record(let record):
                var fields: [Wire.RecordField]?
                var values: SentFieldValues?
                if save.fieldsAsSent {
                    // The server left out the fields this operation sent: they are what it saved.
                    guard let index else {
                        result = .failure(CKError(.internalError, message: "the server sent record \(id) back without its fields, but it was not sent"))
                        break
                    }
                    values = self.sentValues[index]
                    if values == nil { fields = self.sentFields[index] }
                }
                let files = self.assetPlan.withLock { $0?.localFiles } ?? [:]
                result = Result { () throws(CKError) in
                    try CKRecord.decoded(
                        wire: record, fields: fields, sentValues: values, knownID: id, knownUserID: self.lastCreator,
                        localAssetFiles: files)
                }.mapError { $0 }
                if case .success(let saved) = result { self.lastCreator = saved.creatorUserRecordID }
            case .error(let error):
                result = .failure(CKError(wire: error))
            case nil:
                result = .failure(CKError(.internalError, message: "the server sent no outcome for record \(id)"))
            }
            self.perRecordSaveBlock?(id, result)
            switch result {
            case .success(let record):
                if self.modifyRecordsCompletionBlock != nil { self.savedRecords.append(record) }
                self.perRecordCompletionBlock?(record, nil)
            case .failure(let error):
                if let index {
                    let record = self.sent[index]
                    self.perRecordCompletionBlock?(record, error)
                }
            }
        case .perRecordDelete(let delete):
            guard let wireID = delete.recordID, let id = try? CKRecord.ID(wire: wireID) else { return }
            self.perRecordDeleteBlock?(id, delete.error.map { .failure(CKError(wire: $0)) } ?? .success(()))
            if delete.error == nil, self.modifyRecordsCompletionBlock != nil {
                self.deletedRecordIDs.append(id)
            }
        case nil:
            break
        }
    }

    /// The ID object of the record a save event names, and its index in ``sent``: the next one
    /// in request order when it is that one (as a rule), a new one read from the message
    /// otherwise (an event of `failures_only`, a replay), found by ID (nil for a record this
    /// operation did not send).
    private func savedIndex(_ wireID: Wire.RecordID) -> (CKRecord.ID, Int?)? {
        if self.nextSave < self.sent.count {
            let id = self.sent[self.nextSave].recordID
            if id.isNamed(by: wireID) {
                defer { self.nextSave += 1 }
                return (id, self.nextSave)
            }
        }
        guard let id = try? CKRecord.ID(wire: wireID) else { return nil }
        return (id, self.sentIndex[id])
    }

    /// Saved records are decoded with the files they were saved from: nothing is downloaded.
    override func canDeliverInPlace(_ deliveries: [StreamDelivery]) -> Bool {
        Self.onlyEvents(deliveries) { _ in true }
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        self.modifyRecordsResultBlock?(error.map { .failure($0) } ?? .success(()))
        self.modifyRecordsCompletionBlock?(self.savedRecords, self.deletedRecordIDs, error)
    }
}
