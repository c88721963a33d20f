import CirrusKit

// Seed 002, "Best Practices": each sample below is verbatim between its BEGIN and END lines,
// inside a function whose parameters are the values the sample uses but does not define.

func batchSizeLimits(database: CKDatabase, records: [CKRecord]) async throws {
    // BEGIN seed sample
    // Max 400 records per operation
    let batches = records.chunked(into: 400)
    for batch in batches {
        let op = CKModifyRecordsOperation(recordsToSave: batch)
        database.add(op)
        try await Task.sleep(for: .seconds(2))  // Rate limit
    }
    // END seed sample
}

func errorRecoveryInBatches(operation: CKModifyRecordsOperation) {
    // BEGIN seed sample
    operation.perRecordSaveBlock = { recordID, result in
        switch result {
        case .success:
            markAsUploaded(recordID)
        case .failure(let error):
            if let ckError = error as? CKError {
                switch ckError.code {
                case .serverRecordChanged:
                    handleConflict(recordID, error: ckError)
                case .limitExceeded:
                    requeueForSmallerBatch(recordID)
                default:
                    requeueForRetry(recordID)
                }
            }
        }
    }
    // END seed sample
}

func desynchronizeOperations(database: CKDatabase) {
    // BEGIN seed sample
    // Add random delay between operations to avoid server throttling
    func executeWithJitter(_ operation: CKDatabaseOperation) async {
        let jitter = Double.random(in: 0...2)
        try? await Task.sleep(for: .seconds(jitter))
        database.add(operation)
    }
    // END seed sample
}

func cancelOperations(operation: CKOperation, container: CKContainer) {
    // BEGIN seed sample
    // Cancel single operation
    operation.cancel()

    // Cancel all operations
    container.cancelAllOperations()

    // Check if cancelled
    if operation.isCancelled {
        return
    }
    // END seed sample
}

func dependencies(database: CKDatabase) {
    // BEGIN seed sample
    let fetchZonesOp = CKFetchRecordZonesOperation.fetchAllRecordZonesOperation()
    let fetchRecordsOp = CKFetchRecordZoneChangesOperation(...)

    // Fetch records only after zones are fetched
    fetchRecordsOp.addDependency(fetchZonesOp)

    database.add(fetchZonesOp)
    database.add(fetchRecordsOp)
    // END seed sample
}
