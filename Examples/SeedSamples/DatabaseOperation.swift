import CirrusKit

// Seed 002, "CKDatabaseOperation": each sample below is verbatim between its BEGIN and END lines,
// inside a function whose parameters are the values the sample uses but does not define.

func databaseOperation(container: CKContainer, database: CKDatabase) {
    // BEGIN seed sample
    let operation = CKModifyRecordsOperation(...)

    // Common properties
    operation.database = container.privateCloudDatabase
    operation.qualityOfService = .userInitiated
    operation.configuration.timeoutIntervalForRequest = 30
    operation.configuration.timeoutIntervalForResource = 60

    // Add to database (auto-sets database property)
    database.add(operation)

    // Or add to container for non-database operations
    container.add(operation)
    // END seed sample
}
