import CirrusModel
import Foundation
import NIOConcurrencyHelpers

/// Fetching: the database's zone changes since its token, then each changed zone's record
/// changes since the zone's token, each batch reported and its token kept before the next.
extension CKSyncEngine {
    /// One fetch; runs inside the gate.
    func fetch(_ requested: FetchChangesOptions, reason: SyncReason) async throws {
        try await self.checkAccount()
        var context = FetchChangesContext(reason: reason, options: requested)
        if let delegate = self.delegate {
            context = FetchChangesContext(reason: reason, options: await delegate.nextFetchChangesOptions(context, syncEngine: self))
        }
        await self.emit(.willFetchChanges(.init(context: context)))
        try await self.fetchDatabaseChanges(context.options)
        var zones = self.state.read { $0.zonesNeedingFetch }.filter { context.options.scope.contains($0) }
        let first = context.options.prioritizedZoneIDs.filter(zones.contains)
        zones = first + zones.filter { !first.contains($0) }
        for zoneID in zones {
            try await self.fetchRecordZoneChanges(zoneID, group: context.options.operationGroup)
        }
        await self.emit(.didFetchChanges(.init(context: context)))
    }

    /// Reads the database's feed to its end; the zones it names join `zonesNeedingFetch`.
    private func fetchDatabaseChanges(_ options: FetchChangesOptions) async throws {
        /// Zones known before a refetch from scratch: those it does not list were deleted.
        var refetchingFrom: Set<CKRecordZone.ID>?
        var listed = Set<CKRecordZone.ID>()
        while true {
            let token = self.state.read { $0.databaseToken }
            let batch: DatabaseBatch
            do {
                batch = try await self.databaseBatch(since: token, group: options.operationGroup)
            } catch let error as CKError where error.code == .changeTokenExpired && token != nil {
                // Too old: list every zone from the start; the zones' own tokens stay valid.
                refetchingFrom = self.state.update { contents in
                    contents.databaseToken = nil
                    return Set(contents.zoneTokens.keys).union(contents.zonesNeedingFetch)
                }
                continue
            }
            listed.formUnion(batch.changed)
            var deletions = batch.deleted.map { Event.FetchedDatabaseChanges.Deletion(zoneID: $0, reason: .deleted) }
            if !batch.moreComing, let known = refetchingFrom {
                let gone = known.subtracting(listed).subtracting(batch.deleted)
                deletions += gone.sorted { $0.zoneName < $1.zoneName }.map { .init(zoneID: $0, reason: .deleted) }
            }
            self.state.update { contents in
                contents.databaseToken = batch.token
                for zoneID in deletions.map(\.zoneID) {
                    contents.zoneTokens[zoneID] = nil
                    contents.zonesNeedingFetch.removeAll { $0 == zoneID }
                }
                for zoneID in batch.changed where !contents.zonesNeedingFetch.contains(zoneID) {
                    contents.zonesNeedingFetch.append(zoneID)
                }
            }
            if !batch.changed.isEmpty || !deletions.isEmpty {
                await self.emit(.fetchedDatabaseChanges(.init(
                    modifications: batch.changed.map { .init(zoneID: $0) }, deletions: deletions)))
            }
            await self.emitStateUpdate()
            if !batch.moreComing { return }
        }
    }

    private struct DatabaseBatch: Sendable {
        var changed: [CKRecordZone.ID] = []
        var deleted: [CKRecordZone.ID] = []
        var token: CKServerChangeToken?
        var moreComing = false
    }

    private func databaseBatch(since token: CKServerChangeToken?, group: CKOperationGroup?) async throws -> DatabaseBatch {
        let operation = CKFetchDatabaseChangesOperation(previousServerChangeToken: token)
        operation.fetchAllChanges = false
        operation.group = group
        let batch = NIOLockedValueBox(DatabaseBatch())
        operation.recordZoneWithIDChangedBlock = { id in
            batch.withLockedValue { batch in
                batch.deleted.removeAll { $0 == id }
                if !batch.changed.contains(id) { batch.changed.append(id) }
            }
        }
        let deleted: @Sendable (CKRecordZone.ID) -> Void = { id in
            batch.withLockedValue { batch in
                batch.changed.removeAll { $0 == id }
                if !batch.deleted.contains(id) { batch.deleted.append(id) }
            }
        }
        operation.recordZoneWithIDWasDeletedBlock = deleted
        operation.recordZoneWithIDWasPurgedBlock = deleted
        try await self.run(operation) { done in
            operation.fetchDatabaseChangesResultBlock = { result in
                done(result.map { token, moreComing in
                    batch.withLockedValue {
                        $0.token = token
                        $0.moreComing = moreComing
                    }
                })
            }
        }
        return batch.withLockedValue { $0 }
    }

    /// Fetches one zone's changes to the end, batch by batch; a too-old token starts the zone
    /// over, a deleted zone leaves the list.
    private func fetchRecordZoneChanges(_ zoneID: CKRecordZone.ID, group: CKOperationGroup?) async throws {
        await self.emit(.willFetchRecordZoneChanges(.init(zoneID: zoneID)))
        while true {
            let token = self.state.read { $0.zoneTokens[zoneID] }
            let batch: ZoneBatch
            do {
                batch = try await self.zoneBatch(zoneID, since: token, group: group)
            } catch let error as CKError {
                switch error.code {
                case .changeTokenExpired where token != nil:
                    self.state.update { $0.zoneTokens[zoneID] = nil }
                    await self.emit(.didFetchRecordZoneChanges(.init(zoneID: zoneID, error: error)))
                    await self.emitStateUpdate()
                    await self.emit(.willFetchRecordZoneChanges(.init(zoneID: zoneID)))
                    continue
                case .zoneNotFound, .userDeletedZone:
                    // Deleted since the database feed was read: nothing left to fetch.
                    self.state.update { contents in
                        contents.zoneTokens[zoneID] = nil
                        contents.zonesNeedingFetch.removeAll { $0 == zoneID }
                    }
                    await self.emit(.didFetchRecordZoneChanges(.init(zoneID: zoneID, error: error)))
                    await self.emitStateUpdate()
                    return
                default:
                    await self.emit(.didFetchRecordZoneChanges(.init(zoneID: zoneID, error: error)))
                    throw error
                }
            }
            self.state.update { contents in
                contents.zoneTokens[zoneID] = batch.token
                if !batch.moreComing { contents.zonesNeedingFetch.removeAll { $0 == zoneID } }
            }
            if !batch.modifications.isEmpty || !batch.deletions.isEmpty {
                await self.emit(.fetchedRecordZoneChanges(.init(modifications: batch.modifications, deletions: batch.deletions)))
            }
            await self.emitStateUpdate()
            if !batch.moreComing { break }
        }
        await self.emit(.didFetchRecordZoneChanges(.init(zoneID: zoneID, error: nil)))
    }

    private struct ZoneBatch: Sendable {
        var modifications: [Event.FetchedRecordZoneChanges.Modification] = []
        var deletions: [Event.FetchedRecordZoneChanges.Deletion] = []
        var token: CKServerChangeToken?
        var moreComing = false
        var error: CKError?
    }

    private func zoneBatch(_ zoneID: CKRecordZone.ID, since token: CKServerChangeToken?, group: CKOperationGroup?) async throws
        -> ZoneBatch
    {
        let operation = CKFetchRecordZoneChangesOperation(
            recordZoneIDs: [zoneID],
            configurationsByRecordZoneID: [zoneID: .init(previousServerChangeToken: token)])
        operation.fetchAllChanges = false
        operation.group = group
        let batch = NIOLockedValueBox(ZoneBatch())
        operation.recordWasChangedBlock = { _, result in
            guard case .success(let record) = result else { return }
            batch.withLockedValue { $0.modifications.append(.init(record: record)) }
        }
        operation.recordWithIDWasDeletedBlock = { id, type in
            batch.withLockedValue { $0.deletions.append(.init(recordID: id, recordType: type)) }
        }
        operation.recordZoneFetchResultBlock = { _, result in
            batch.withLockedValue { batch in
                switch result {
                case .success(let (token, _, moreComing)):
                    batch.token = token
                    batch.moreComing = moreComing
                case .failure(let error):
                    batch.error = CKError.wrapping(error)
                }
            }
        }
        try await self.run(operation) { operation.fetchRecordZoneChangesResultBlock = $0 }
        let result = batch.withLockedValue { $0 }
        if let error = result.error { throw error }
        guard result.token != nil else {
            throw CKError(.internalError, message: "the server finished without a change token for zone \(zoneID.zoneName)")
        }
        return result
    }
}
