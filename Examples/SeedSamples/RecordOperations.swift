import CirrusKit

// Seed 002, "Record Operations": each sample below is verbatim between its BEGIN and END lines,
// inside a function whose parameters are the values the sample uses but does not define.

func modifyRecords(database: CKDatabase, record1: CKRecord, record2: CKRecord, record3: CKRecord, oldRecordID1: CKRecord.ID, oldRecordID2: CKRecord.ID) {
    // BEGIN seed sample
    let recordsToSave = [record1, record2, record3]
    let recordIDsToDelete = [oldRecordID1, oldRecordID2]

    let operation = CKModifyRecordsOperation(
        recordsToSave: recordsToSave,
        recordIDsToDelete: recordIDsToDelete
    )

    // Save policy
    operation.savePolicy = .changedKeys  // Only modified fields

    // Atomic - all or nothing
    operation.isAtomic = true

    // Per-record callbacks
    operation.perRecordSaveBlock = { recordID, result in
        switch result {
        case .success(let record):
            print("Saved: \(recordID)")
        case .failure(let error):
            print("Failed \(recordID): \(error)")
        }
    }

    operation.perRecordDeleteBlock = { recordID, result in
        switch result {
        case .success:
            print("Deleted: \(recordID)")
        case .failure(let error):
            print("Delete failed \(recordID): \(error)")
        }
    }

    // Completion
    operation.modifyRecordsResultBlock = { result in
        switch result {
        case .success:
            print("All operations completed")
        case .failure(let error):
            print("Batch failed: \(error)")
        }
    }

    database.add(operation)
    // END seed sample
}

func savePolicies(operation: CKModifyRecordsOperation) {
    // BEGIN seed sample
    // Only send fields that changed (safest for concurrent edits)
    operation.savePolicy = .changedKeys

    // Send all fields (overwrites everything)
    operation.savePolicy = .allKeys

    // Fail if server record changed (default)
    operation.savePolicy = .ifServerRecordUnchanged
    // END seed sample
}

func fetchRecords(database: CKDatabase, id1: CKRecord.ID, id2: CKRecord.ID, id3: CKRecord.ID) {
    // BEGIN seed sample
    let recordIDs = [id1, id2, id3]
    let operation = CKFetchRecordsOperation(recordIDs: recordIDs)

    // Only fetch specific keys (optimization)
    operation.desiredKeys = ["title", "content", "modifiedAt"]

    // Per-record callback
    operation.perRecordResultBlock = { recordID, result in
        switch result {
        case .success(let record):
            processRecord(record)
        case .failure(let error):
            handleError(error, for: recordID)
        }
    }

    // Completion
    operation.fetchRecordsResultBlock = { result in
        switch result {
        case .success:
            print("Fetch completed")
        case .failure(let error):
            print("Fetch failed: \(error)")
        }
    }

    database.add(operation)
    // END seed sample
}

func query(database: CKDatabase, oneWeekAgo: Date, myZoneID: CKRecordZone.ID) {
    // BEGIN seed sample
    let predicate = NSPredicate(format: "category == %@ AND createdAt > %@", "work", oneWeekAgo)
    let query = CKQuery(recordType: "Note", predicate: predicate)
    query.sortDescriptors = [NSSortDescriptor(key: "createdAt", ascending: false)]

    let operation = CKQueryOperation(query: query)
    operation.zoneID = myZoneID  // Optional: specific zone
    operation.desiredKeys = ["title", "content"]
    operation.resultsLimit = 50  // Pagination

    // Collect results
    var fetchedRecords: [CKRecord] = []

    operation.recordMatchedBlock = { recordID, result in
        if case .success(let record) = result {
            fetchedRecords.append(record)
        }
    }

    operation.queryResultBlock = { result in
        switch result {
        case .success(let cursor):
            if let cursor = cursor {
                // More results available - fetch next page
                fetchNextPage(cursor: cursor)
            } else {
                // All results fetched
                processResults(fetchedRecords)
            }
        case .failure(let error):
            print("Query failed: \(error)")
        }
    }

    database.add(operation)
    // END seed sample
}

func cursorPagination(database: CKDatabase) {
    var allRecords: [CKRecord] = []  // the sample's list, which it appends to
    // BEGIN seed sample
    func fetchAllRecords(cursor: CKQueryOperation.Cursor? = nil) {
        let operation: CKQueryOperation

        if let cursor = cursor {
            operation = CKQueryOperation(cursor: cursor)
        } else {
            let query = CKQuery(recordType: "Note", predicate: NSPredicate(value: true))
            operation = CKQueryOperation(query: query)
        }

        operation.resultsLimit = 100

        operation.recordMatchedBlock = { _, result in
            if case .success(let record) = result {
                allRecords.append(record)
            }
        }

        operation.queryResultBlock = { result in
            if case .success(let nextCursor) = result {
                if let nextCursor = nextCursor {
                    fetchAllRecords(cursor: nextCursor)  // Recursive
                } else {
                    print("Fetched all \(allRecords.count) records")
                }
            }
        }

        database.add(operation)
    }
    // END seed sample
}
