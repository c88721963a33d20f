import CirrusKit
import CirrusModel
import Foundation
import NIOConcurrencyHelpers
import Testing

// The change-feed samples of ../shared/seeds/002 (CKFetchRecordZoneChangesOperation,
// CKFetchDatabaseChangesOperation), copied verbatim between the `// --- sample` markers and
// run against cirrusd over TLS. Only the scaffolding the samples assume (token storage, local
// store, zone IDs, the follow-up fetch) is ours.

private let log = NIOLockedValueBox<[String]>([])
private func print(_ line: String) { log.withLockedValue { $0.append(line) } }

private let storedZoneTokens = NIOLockedValueBox<[CKRecordZone.ID: CKServerChangeToken]>([:])
private let storedDatabaseToken = NIOLockedValueBox<CKServerChangeToken?>(nil)
private let localRecords = NIOLockedValueBox<[CKRecord.ID: CKRecord]>([:])

private func loadTokens() -> [CKRecordZone.ID: CKServerChangeToken] { storedZoneTokens.withLockedValue { $0 } }
private func saveTokens(_ tokens: [CKRecordZone.ID: CKServerChangeToken]) { storedZoneTokens.withLockedValue { $0 = tokens } }
private func loadDatabaseToken() -> CKServerChangeToken? { storedDatabaseToken.withLockedValue { $0 } }
private func saveDatabaseToken(_ token: CKServerChangeToken) { storedDatabaseToken.withLockedValue { $0 = token } }
private func saveLocally(_ record: CKRecord) { localRecords.withLockedValue { $0[record.recordID] = record } }
private func deleteLocally(_ recordID: CKRecord.ID) { localRecords.withLockedValue { $0[recordID] = nil } }

@Suite("Seed change-feed samples against cirrusd", .serialized)
struct SeedChangeFeedSamplesTests {
    /// Runs the zone-changes sample once for `zone1ID`, `zone2ID` and waits for it.
    private func runZoneChangesSample(_ database: CKDatabase, _ zone1ID: CKRecordZone.ID, _ zone2ID: CKRecordZone.ID) async {
        // --- sample
        var serverChangeTokens: [CKRecordZone.ID: CKServerChangeToken] = loadTokens()

        let zoneIDs = [zone1ID, zone2ID]
        var configurations: [CKRecordZone.ID: CKFetchRecordZoneChangesOperation.ZoneConfiguration] = [:]

        for zoneID in zoneIDs {
            let config = CKFetchRecordZoneChangesOperation.ZoneConfiguration()
            config.previousServerChangeToken = serverChangeTokens[zoneID]
            configurations[zoneID] = config
        }

        let operation = CKFetchRecordZoneChangesOperation(
            recordZoneIDs: zoneIDs,
            configurationsByRecordZoneID: configurations
        )

        // New/modified records
        operation.recordWasChangedBlock = { recordID, result in
            if case .success(let record) = result {
                saveLocally(record)
            }
        }

        // Deleted records
        operation.recordWithIDWasDeletedBlock = { recordID, recordType in
            deleteLocally(recordID)
        }

        // Zone completion - save new token
        operation.recordZoneFetchResultBlock = { zoneID, result in
            switch result {
            case .success((let serverChangeToken, _, _)):
                serverChangeTokens[zoneID] = serverChangeToken
                saveTokens(serverChangeTokens)
            case .failure(let error):
                if let ckError = error as? CKError, ckError.code == .changeTokenExpired {
                    // Token expired - do full fetch
                    serverChangeTokens[zoneID] = nil
                }
            }
        }

        database.add(operation)
        // --- end of sample
        await finished(operation)
    }

    @Test func recordZoneChangesSample() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let zone1ID = CKRecordZone.ID(zoneName: "Zone1")
            let zone2ID = CKRecordZone.ID(zoneName: "Zone2")
            _ = try await database.modifyRecordZones(saving: [CKRecordZone(zoneID: zone1ID), CKRecordZone(zoneID: zone2ID)], deleting: [])
            let a = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "a", zoneID: zone1ID))
            let b = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "b", zoneID: zone2ID))
            _ = try await database.modifyRecords(saving: [a, b], deleting: [])
            storedZoneTokens.withLockedValue { $0 = [:] }
            localRecords.withLockedValue { $0 = [:] }

            await runZoneChangesSample(database, zone1ID, zone2ID)
            #expect(Set(localRecords.withLockedValue { $0.keys.map(\.recordName) }) == ["a", "b"])
            #expect(storedZoneTokens.withLockedValue { Set($0.keys) } == [zone1ID, zone2ID])

            // Second sync: only what changed since the saved tokens.
            let c = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "c", zoneID: zone2ID))
            _ = try await database.modifyRecords(saving: [c], deleting: [a.recordID])
            await runZoneChangesSample(database, zone1ID, zone2ID)
            #expect(Set(localRecords.withLockedValue { $0.keys.map(\.recordName) }) == ["b", "c"])
        }
    }

    @Test func databaseChangesSample() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let kept = CKRecordZone.ID(zoneName: "Kept")
            let gone = CKRecordZone.ID(zoneName: "Gone")
            _ = try await database.modifyRecordZones(saving: [CKRecordZone(zoneID: kept), CKRecordZone(zoneID: gone)], deleting: [])
            storedDatabaseToken.withLockedValue { $0 = nil }
            log.withLockedValue { $0.removeAll() }
            var zonesToFetch: [CKRecordZone.ID] = []
            var fetchedZones: [CKRecordZone.ID] = []
            func deleteLocalZoneData(_ zoneID: CKRecordZone.ID) { print("wiped \(zoneID.zoneName)") }
            func fetchZoneChanges(for zoneIDs: [CKRecordZone.ID]) { fetchedZones = zoneIDs }

            func runSample() async {
                // --- sample
                var databaseChangeToken: CKServerChangeToken? = loadDatabaseToken()

                let operation = CKFetchDatabaseChangesOperation(previousServerChangeToken: databaseChangeToken)

                operation.recordZoneWithIDWasDeletedBlock = { zoneID in
                    print("Zone deleted: \(zoneID)")
                    deleteLocalZoneData(zoneID)
                }

                operation.recordZoneWithIDChangedBlock = { zoneID in
                    print("Zone changed: \(zoneID)")
                    zonesToFetch.append(zoneID)
                }

                operation.fetchDatabaseChangesResultBlock = { result in
                    switch result {
                    case .success((let newToken, _)):
                        databaseChangeToken = newToken
                        saveDatabaseToken(newToken)
                        // Now fetch record changes for modified zones
                        fetchZoneChanges(for: zonesToFetch)
                    case .failure(let error):
                        print("Database changes fetch failed: \(error)")
                    }
                }

                database.add(operation)
                // --- end of sample
                await finished(operation)
            }

            await runSample()
            #expect(Set(fetchedZones) == [kept, gone])
            #expect(storedDatabaseToken.withLockedValue { $0 } != nil)

            zonesToFetch = []
            log.withLockedValue { $0.removeAll() }
            _ = try await database.deleteRecordZone(withID: gone)
            _ = try await database.save(CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n", zoneID: kept)))
            await runSample()
            #expect(fetchedZones == [kept])
            #expect(log.withLockedValue { $0.contains("wiped Gone") })
        }
    }
}
