import CirrusWire
import Testing

@testable import CirrusStore

/// The domain values the storage protocol answers with (no storage involved).
@Suite("Storage outcomes")
struct StorageOutcomeTests {
    private let server = note("n", tag: "1-2", [field("v", .int64Value(2))])
    private let client = note("n", tag: "1-1", [field("v", .int64Value(3))])

    @Test func aConflictsRecordsAreValuesComparedByContent() {
        let failure = ItemFailure(.serverRecordChanged, "record n was changed on the server", serverRecord: server, clientRecord: client)
        var copy = failure
        copy.serverRecord = client
        #expect(failure.serverRecord == server, "changing a copy leaves the original alone")
        #expect(copy.serverRecord == client && copy.clientRecord == client)
        let again = ItemFailure(.serverRecordChanged, "record n was changed on the server", serverRecord: server, clientRecord: client)
        #expect(failure == again)
        #expect(failure.hashValue == again.hashValue)
        #expect(failure != copy)
    }

    @Test func aFailureWhoseRecordsWereRemovedEqualsOneThatNeverHadThem() {
        var failure = ItemFailure(.serverRecordChanged, "m", serverRecord: server)
        failure.serverRecord = nil
        #expect(failure == ItemFailure(.serverRecordChanged, "m"))
        #expect(failure.hashValue == ItemFailure(.serverRecordChanged, "m").hashValue)
    }

    @Test func anOutcomeTellsItsValueOrItsFailure() {
        let saved = RecordSaveOutcome(id: server.recordID, result: .success(server))
        #expect(saved.value == server && saved.failure == nil)
        let refused = RecordSaveOutcome(id: nil, result: .failure(ItemFailure(.invalidArguments, "record without a record ID")))
        #expect(refused.value == nil && refused.failure?.code == .invalidArguments)
        #expect(RecordModificationResult(saves: [saved]).hasFailures == false)
        #expect(RecordModificationResult(saves: [saved, refused]).hasFailures)
        #expect(RecordModificationResult(deletes: [RecordDeletion(id: recordID("x"), failure: ItemFailure(.permissionFailure, "p"))]).hasFailures)
    }
}
