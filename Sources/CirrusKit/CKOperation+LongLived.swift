import CirrusModel
import CirrusWire
import Foundation

/// Rebuilding a long-lived operation from the server's `LongLivedOperationInfo`: the subclass
/// its request names, the request decoded back into that subclass's properties, its ID,
/// database, configuration and group.
extension CKOperation {
    /// The operation object for `info`, ready to resume in `container`.
    ///
    /// - throws: `CKError` `.internalError` when the info has no request, or one this library
    ///   has no operation class for; `.invalidArguments` when the request does not decode.
    static func longLivedOperation(from info: Wire.LongLivedOperationInfo, in container: CKContainer) throws -> CKOperation {
        guard var open = info.open, let request = open.request else {
            throw CKError(.internalError, message: "the server sent long-lived operation \(info.operationID) without its request")
        }
        if open.operationID.isEmpty {
            open.operationID = info.operationID
        }
        let operation: CKOperation
        switch request {
        case .modifyRecords(let request):
            operation = try CKModifyRecordsOperation(wire: request)
        case .fetchRecords(let request):
            operation = try CKFetchRecordsOperation(wire: request)
        case .query(let request):
            operation = try CKQueryOperation(wire: request)
        case .modifyRecordZones(let request):
            operation = try CKModifyRecordZonesOperation(wire: request)
        case .fetchRecordZones(let request):
            operation = try CKFetchRecordZonesOperation(wire: request)
        case .fetchRecordZoneChanges(let request):
            operation = try CKFetchRecordZoneChangesOperation(wire: request)
        case .fetchDatabaseChanges(let request):
            operation = CKFetchDatabaseChangesOperation(wire: request)
        case .modifySubscriptions(let request):
            operation = try CKModifySubscriptionsOperation(wire: request)
        case .fetchSubscriptions(let request):
            operation = CKFetchSubscriptionsOperation(wire: request)
        case .fetchNotificationChanges(let request):
            operation = CKFetchNotificationChangesOperation(wire: request)
        default:
            throw CKError(
                .internalError,
                message: "long-lived operation \(info.operationID) is of a kind this version of CirrusKit cannot resume"
            )
        }
        let configuration = CKOperation.Configuration(explicit: .init(wire: open.configuration))
        configuration.container = container
        configuration.isLongLived = true
        operation.configuration = configuration
        operation.group = open.group.map(CKOperationGroup.init(wire:))
        if let databaseOperation = operation as? CKDatabaseOperation {
            let scope = CKDatabaseScope(wire: open.databaseScope) ?? .private
            databaseOperation.database = container.database(with: scope)
        }
        operation.adoptLongLivedOperation(open)
        return operation
    }
}

extension CKOperation.Configuration.Explicit {
    /// The explicit values a wire configuration carries; the container is left unset (the
    /// caller knows it).
    init(wire: Wire.OperationConfiguration?) {
        self.init()
        guard let wire else { return }
        self.qualityOfService = wire.qualityOfService.map(QualityOfService.init(wire:))
        self.allowsCellularAccess = wire.allowsCellularAccess
        self.isLongLived = wire.isLongLived
        self.timeoutIntervalForRequest = wire.timeoutIntervalForRequestMs.map { Double($0) / 1000 }
        self.timeoutIntervalForResource = wire.timeoutIntervalForResourceMs.map { Double($0) / 1000 }
    }
}

extension QualityOfService {
    init(wire: Wire.OperationQualityOfService) {
        switch wire {
        case .background: self = .background
        case .utility: self = .utility
        case .userInitiated: self = .userInitiated
        case .userInteractive: self = .userInteractive
        default: self = .default
        }
    }
}

extension CKModifyRecordsOperation.RecordSavePolicy {
    init(wire: Wire.SavePolicy) {
        switch wire {
        case .changedKeys: self = .changedKeys
        case .allKeys: self = .allKeys
        default: self = .ifServerRecordUnchanged
        }
    }
}

extension CKModifyRecordsOperation {
    convenience init(wire request: Wire.ModifyRecordsRequest) throws {
        self.init(
            recordsToSave: try request.recordsToSave.map { (wire) throws(CKError) in
                let record = try CKRecord.decoded(wire: wire)
                // Setting a key marks it changed (what the `changedKeys` save policy sends).
                let encrypted = Set(wire.fields.filter(\.isEncrypted).map(\.key))
                for key in wire.changedKeys {
                    if encrypted.contains(key) {
                        record.encryptedValues[key] = record.encryptedValues[key]
                    } else {
                        record[key] = record[key]
                    }
                }
                return record
            },
            recordIDsToDelete: try request.recordIDsToDelete.map { (id) throws(CKError) in try CKRecord.ID(wire: id) }
        )
        self.savePolicy = RecordSavePolicy(wire: request.savePolicy)
        self.clientChangeTokenData = request.clientChangeToken.isEmpty ? nil : Data(request.clientChangeToken)
        self.isAtomic = request.isAtomic ?? true
        self.reportsSuccessfulItems = !request.failuresOnly
    }
}

extension CKFetchRecordsOperation {
    convenience init(wire request: Wire.FetchRecordsRequest) throws {
        self.init(recordIDs: try request.recordIDs.map { (id) throws(CKError) in try CKRecord.ID(wire: id) })
        self.desiredKeys = request.desiredKeysSpecified ? request.desiredKeys : nil
    }
}

extension CKQueryOperation {
    convenience init(wire request: Wire.QueryRequest) throws {
        self.init()
        switch request.start {
        case .query(let query):
            self.query = CKQuery(wire: query)
        case .cursor(let cursor):
            self.cursor = Cursor(wire: cursor)
        case nil:
            throw CKError(.invalidArguments, message: "the long-lived query has neither a query nor a cursor")
        }
        self.zoneID = try request.zoneID.map { (id) throws(CKError) in try CKRecordZone.ID(wire: id) }
        self.desiredKeys = request.desiredKeysSpecified ? request.desiredKeys : nil
        self.resultsLimit = Int(request.resultsLimit)
    }
}

extension CKModifyRecordZonesOperation {
    convenience init(wire request: Wire.ModifyRecordZonesRequest) throws {
        self.init(
            recordZonesToSave: try request.recordZonesToSave.map { (zone) throws(CKError) in try CKRecordZone(wire: zone) },
            recordZoneIDsToDelete: try request.recordZoneIDsToDelete.map { (id) throws(CKError) in try CKRecordZone.ID(wire: id) }
        )
    }
}

extension CKFetchRecordZonesOperation {
    convenience init(wire request: Wire.FetchRecordZonesRequest) throws {
        self.init()
        self.recordZoneIDs =
            request.fetchAllRecordZones
            ? nil : try request.recordZoneIDs.map { (id) throws(CKError) in try CKRecordZone.ID(wire: id) }
    }
}

extension CKFetchRecordZoneChangesOperation {
    convenience init(wire request: Wire.FetchRecordZoneChangesRequest) throws {
        var zoneIDs: [CKRecordZone.ID] = []
        var configurations: [CKRecordZone.ID: ZoneConfiguration] = [:]
        for wire in request.zoneConfigurations {
            guard let wireID = wire.zoneID else {
                throw CKError(.invalidArguments, message: "a zone configuration of the long-lived fetch names no zone")
            }
            let zoneID = try CKRecordZone.ID(wire: wireID)
            zoneIDs.append(zoneID)
            configurations[zoneID] = ZoneConfiguration(
                previousServerChangeToken: wire.previousServerChangeToken.map(CKServerChangeToken.init(wire:)),
                resultsLimit: Int(wire.resultsLimit),
                desiredKeys: wire.desiredKeysSpecified ? wire.desiredKeys : nil
            )
        }
        self.init(recordZoneIDs: zoneIDs, configurationsByRecordZoneID: configurations)
        self.fetchAllChanges = request.fetchAllChanges ?? true
    }
}

extension CKFetchDatabaseChangesOperation {
    convenience init(wire request: Wire.FetchDatabaseChangesRequest) {
        self.init(previousServerChangeToken: request.previousServerChangeToken.map(CKServerChangeToken.init(wire:)))
        self.resultsLimit = Int(request.resultsLimit)
        self.fetchAllChanges = request.fetchAllChanges ?? true
    }
}

extension CKModifySubscriptionsOperation {
    convenience init(wire request: Wire.ModifySubscriptionsRequest) throws {
        self.init(
            subscriptionsToSave: try request.subscriptionsToSave.map { (wire) throws(CKError) in try CKSubscription.make(wire: wire) },
            subscriptionIDsToDelete: request.subscriptionIDsToDelete
        )
    }
}

extension CKFetchSubscriptionsOperation {
    convenience init(wire request: Wire.FetchSubscriptionsRequest) {
        self.init()
        self.subscriptionIDs = request.fetchAllSubscriptions ? nil : request.subscriptionIDs
    }
}

extension CKFetchNotificationChangesOperation {
    convenience init(wire request: Wire.FetchNotificationChangesRequest) {
        self.init(previousServerChangeToken: request.previousServerChangeToken.map(CKServerChangeToken.init(wire:)))
        self.resultsLimit = Int(request.resultsLimit)
    }
}
