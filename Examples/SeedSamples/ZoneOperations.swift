import CirrusKit

// Seed 002, "Zone Operations": each sample below is verbatim between its BEGIN and END lines,
// inside a function whose parameters are the values the sample uses but does not define.

func modifyRecordZones(database: CKDatabase) {
    // BEGIN seed sample
    let zoneID = CKRecordZone.ID(zoneName: "MyZone", ownerName: CKCurrentUserDefaultName)
    let zone = CKRecordZone(zoneID: zoneID)

    let operation = CKModifyRecordZonesOperation(
        recordZonesToSave: [zone],
        recordZoneIDsToDelete: nil
    )

    operation.perRecordZoneSaveBlock = { zoneID, result in
        switch result {
        case .success(let zone):
            print("Zone created: \(zone.zoneID)")
        case .failure(let error):
            print("Zone creation failed: \(error)")
        }
    }

    operation.modifyRecordZonesResultBlock = { result in
        // Overall completion
    }

    database.add(operation)
    // END seed sample
}

func fetchRecordZones(database: CKDatabase, zoneID1: CKRecordZone.ID, zoneID2: CKRecordZone.ID) {
    // BEGIN seed sample
    // Fetch specific zones
    let operation = CKFetchRecordZonesOperation(recordZoneIDs: [zoneID1, zoneID2])

    // Or fetch all zones
    let allZonesOperation = CKFetchRecordZonesOperation.fetchAllRecordZonesOperation()

    operation.perRecordZoneResultBlock = { zoneID, result in
        if case .success(let zone) = result {
            print("Zone: \(zone.zoneID.zoneName)")
        }
    }

    database.add(operation)
    // END seed sample
}

func fetchRecordZoneChanges(database: CKDatabase, zone1ID: CKRecordZone.ID, zone2ID: CKRecordZone.ID) {
    // BEGIN seed sample
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
    // END seed sample
}

func fetchDatabaseChanges(database: CKDatabase) {
    var zonesToFetch: [CKRecordZone.ID] = []  // the sample's list of zones to fetch next
    // BEGIN seed sample
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
    // END seed sample
}
