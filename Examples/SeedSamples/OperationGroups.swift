import CirrusKit

// Seed 002, "Operation Groups": each sample below is verbatim between its BEGIN and END lines,
// inside a function whose parameters are the values the sample uses but does not define.

func operationGroups(database: CKDatabase) {
    // BEGIN seed sample
    let group = CKOperationGroup()
    group.expectedSendSize = .megabytes
    group.expectedReceiveSize = .megabytes
    group.name = "Initial Sync"

    let fetchOp = CKFetchRecordZoneChangesOperation(...)
    fetchOp.group = group

    let modifyOp = CKModifyRecordsOperation(...)
    modifyOp.group = group

    // Operations in same group share network resources
    database.add(fetchOp)
    database.add(modifyOp)
    // END seed sample
}
