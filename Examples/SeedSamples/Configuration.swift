import CirrusKit

// Seed 002, "Configuration & QoS": each sample below is verbatim between its BEGIN and END lines,
// inside a function whose parameters are the values the sample uses but does not define.

func qualityOfService(operation: CKOperation) {
    // BEGIN seed sample
    operation.qualityOfService = .userInitiated  // User waiting
    operation.qualityOfService = .utility        // Background sync
    operation.qualityOfService = .background     // Low priority

    // Higher QoS = faster scheduling, more resources
    // END seed sample
}

func timeouts(operation: CKOperation) {
    // BEGIN seed sample
    operation.configuration.timeoutIntervalForRequest = 30   // Per-request
    operation.configuration.timeoutIntervalForResource = 300 // Total operation
    // END seed sample
}

func longLivedOperations(operation: CKOperation, container: CKContainer) {
    // BEGIN seed sample
    operation.configuration.isLongLived = true
    // The seed sets this block on operation.configuration; CloudKit (and Cirrus) have it on
    // the operation. The one line of the seed changed beyond the import.
    operation.longLivedOperationWasPersistedBlock = {
        print("Operation persisted - will resume on next launch")
    }

    // On next app launch, fetch persisted operations
    container.fetchAllLongLivedOperationIDs { operationIDs, error in
        guard let ids = operationIDs else { return }
        for id in ids {
            container.fetchLongLivedOperation(withID: id) { operation, error in
                if let op = operation {
                    // Resume operation
                    container.add(op)
                }
            }
        }
    }
    // END seed sample
}
