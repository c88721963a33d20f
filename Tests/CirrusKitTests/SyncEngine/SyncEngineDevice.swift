import CirrusKit
import Foundation
import NIOConcurrencyHelpers
import Testing

/// A sync app's device for the engine tests: a local store of "Item" records (field `v`),
/// kept in sync by a `CKSyncEngine`. Local edits win conflicts: on `serverRecordChanged` the
/// device takes the server's record (and change tag), puts its own value on it and sends it
/// again. A save into a zone that does not exist (yet) queues the zone and the save again, as
/// Apple's sample app does (unless `createsMissingZones` is false). A zone whose token expired is fetched from the start: records of that zone not
/// reported again are dropped.
final class EngineDevice: CKSyncEngineDelegate, Sendable {
    struct Store: Sendable {
        /// The last server record known for each ID (with its change tag).
        var server: [CKRecord.ID: CKRecord] = [:]
        /// Values edited here and not yet acknowledged.
        var local: [CKRecord.ID: Int] = [:]
        /// Every value the server acknowledged from this device, by record.
        var acknowledged: [CKRecord.ID: Set<Int>] = [:]
        var conflicts: [CKSyncEngine.Event.SentRecordZoneChanges.FailedRecordSave] = []
        var otherFailures: [CKError] = []
        var serialization: CKSyncEngine.State.Serialization?
        var events: [String] = []
        /// Zones being fetched again from the start, with the records reported since.
        var refetching: [CKRecordZone.ID: Set<CKRecord.ID>] = [:]
        var expiredZones = 0
        /// When each record change arrived (for the latency bench).
        var arrivals: [CKRecord.ID: ContinuousClock.Instant] = [:]
    }

    let name: String
    let createsMissingZones: Bool
    let store = NIOLockedValueBox(Store())
    /// Runs inside the delegate's handling of each `.sentRecordZoneChanges`, before it returns.
    let whileHandlingSent = NIOLockedValueBox<(@Sendable () async -> Void)?>(nil)
    /// Runs once the device built a batch for the engine, before the engine sends it.
    let afterBuildingBatch = NIOLockedValueBox<(@Sendable () -> Void)?>(nil)
    private let engineBox = NIOLockedValueBox<CKSyncEngine?>(nil)
    /// The ID of each record change fetched, as the delegate gets it.
    let fetched: AsyncStream<CKRecord.ID>
    private let fetchedContinuation: AsyncStream<CKRecord.ID>.Continuation

    init(name: String, createsMissingZones: Bool = true) {
        self.name = name
        self.createsMissingZones = createsMissingZones
        (self.fetched, self.fetchedContinuation) = AsyncStream.makeStream(of: CKRecord.ID.self)
    }

    var engine: CKSyncEngine {
        get throws { try #require(self.engineBox.withLockedValue { $0 }) }
    }

    /// Starts the device's engine on `database` from `serialization`.
    @discardableResult
    func start(
        database: CKDatabase, serialization: CKSyncEngine.State.Serialization? = nil, automaticallySync: Bool = true,
        subscriptionID: String? = nil
    ) -> CKSyncEngine {
        var configuration = CKSyncEngine.Configuration(database: database, stateSerialization: serialization, delegate: self)
        configuration.automaticallySync = automaticallySync
        configuration.subscriptionID = subscriptionID
        let engine = CKSyncEngine(configuration)
        self.engineBox.withLockedValue { $0 = engine }
        return engine
    }

    /// Lets the engine go (the device goes offline); its last state stays in `store`.
    func stop() async {
        let engine = self.engineBox.withLockedValue { engine -> CKSyncEngine? in
            defer { engine = nil }
            return engine
        }
        await engine?.cancelOperations()
    }

    /// Edits a record locally and tells the engine.
    func edit(_ id: CKRecord.ID, value: Int) throws {
        self.store.withLockedValue { $0.local[id] = value }
        try self.engine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
    }

    /// The device's view: record name → value, from the server records it knows.
    var values: [String: Int] {
        self.store.withLockedValue { store in
            Dictionary(uniqueKeysWithValues: store.server.map { ($0.key.recordName, ($0.value["v"] as? Int) ?? -1) })
        }
    }

    /// The device's view with change tags: record name → "tag value".
    var tagged: [String: String] {
        self.store.withLockedValue { store in
            Dictionary(uniqueKeysWithValues: store.server.map {
                ($0.key.recordName, "\($0.value.recordChangeTag ?? "") \(($0.value["v"] as? Int) ?? -1)")
            })
        }
    }

    // MARK: - CKSyncEngineDelegate

    func handleEvent(_ event: CKSyncEngine.Event, syncEngine: CKSyncEngine) async {
        let now = ContinuousClock.now
        var readd: [CKSyncEngine.PendingRecordZoneChange] = []
        var zones: [CKSyncEngine.PendingDatabaseChange] = []
        self.store.withLockedValue { store in
            store.events.append(event.description)
            switch event {
            case .stateUpdate(let update):
                store.serialization = update.stateSerialization
            case .fetchedDatabaseChanges(let changes):
                for deletion in changes.deletions {
                    store.server = store.server.filter { $0.key.zoneID != deletion.zoneID }
                }
            case .fetchedRecordZoneChanges(let changes):
                for modification in changes.modifications {
                    let id = modification.record.recordID
                    store.server[id] = modification.record
                    store.refetching[id.zoneID]?.insert(id)
                    if store.arrivals[id] == nil { store.arrivals[id] = now }
                }
                for deletion in changes.deletions {
                    store.server[deletion.recordID] = nil
                }
            case .willFetchRecordZoneChanges:
                break
            case .didFetchRecordZoneChanges(let event):
                if event.error?.code == .changeTokenExpired {
                    store.expiredZones += 1
                    store.refetching[event.zoneID] = []
                } else if event.error == nil, let kept = store.refetching.removeValue(forKey: event.zoneID) {
                    store.server = store.server.filter { $0.key.zoneID != event.zoneID || kept.contains($0.key) }
                }
            case .sentRecordZoneChanges(let sent):
                for record in sent.savedRecords {
                    let id = record.recordID
                    store.server[id] = record
                    if let value = record["v"] as? Int {
                        store.acknowledged[id, default: []].insert(value)
                        if store.local[id] == value { store.local[id] = nil }
                    }
                }
                for failure in sent.failedRecordSaves {
                    let id = failure.record.recordID
                    switch failure.error.code {
                    case .serverRecordChanged:
                        store.conflicts.append(failure)
                        if let server = failure.error.serverRecord { store.server[id] = server }
                        if store.local[id] != nil { readd.append(.saveRecord(id)) }
                    case .zoneNotFound where self.createsMissingZones:
                        zones.append(.saveZone(CKRecordZone(zoneID: id.zoneID)))
                        if store.local[id] != nil { readd.append(.saveRecord(id)) }
                    case .networkFailure, .networkUnavailable, .serviceUnavailable, .zoneBusy, .requestRateLimited,
                        .operationCancelled, .serverResponseLost:
                        break  // the engine keeps it pending and retries
                    default:
                        store.otherFailures.append(failure.error)
                    }
                }
            default:
                break
            }
        }
        if !zones.isEmpty {
            syncEngine.state.add(pendingDatabaseChanges: zones)
        }
        if !readd.isEmpty {
            syncEngine.state.add(pendingRecordZoneChanges: readd)
        }
        if case .sentRecordZoneChanges = event, let hook = self.whileHandlingSent.withLockedValue({ $0 }) {
            await hook()
        }
        if case .fetchedRecordZoneChanges(let changes) = event {
            for modification in changes.modifications { self.fetchedContinuation.yield(modification.record.recordID) }
        }
    }

    func nextRecordZoneChangeBatch(
        _ context: CKSyncEngine.SendChangesContext, syncEngine: CKSyncEngine
    ) async -> CKSyncEngine.RecordZoneChangeBatch? {
        let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
        let batch = await CKSyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in
            self.store.withLockedValue { store -> CKRecord? in
                guard let value = store.local[id] else { return nil }
                let record = store.server[id]?.copy() as? CKRecord ?? CKRecord(recordType: "Item", recordID: id)
                record["v"] = value
                return record
            }
        }
        self.afterBuildingBatch.withLockedValue { $0 }?()
        return batch
    }
}


