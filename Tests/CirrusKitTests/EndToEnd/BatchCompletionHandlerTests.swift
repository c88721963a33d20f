import CirrusKit
import Foundation
import Testing

/// Waits for a completion handler's result.
private func result<Success: Sendable>(
    _ start: (@escaping @Sendable (Result<Success, any Error>) -> Void) -> Void
) async -> Result<Success, any Error> {
    await withCheckedContinuation { continuation in
        start { continuation.resume(returning: $0) }
    }
}

@Suite("The batch completion-handler forms, end to end")
struct BatchCompletionHandlerTests {
    @Test func recordsZonesQueriesAndSubscriptions() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let zoneID = CKRecordZone.ID(zoneName: "Batch")
            let zones = try await result { database.modifyRecordZones(saving: [CKRecordZone(zoneID: zoneID)], deleting: [], completionHandler: $0) }.get()
            #expect(try zones.saveResults[zoneID]?.get().zoneID == zoneID)
            let fetchedZones = try await result { database.fetch(withRecordZoneIDs: [zoneID, CKRecordZone.ID(zoneName: "Nope")], completionHandler: $0) }.get()
            #expect(try fetchedZones[zoneID]?.get() != nil)
            #expect(((fetchedZones[CKRecordZone.ID(zoneName: "Nope")]?.failure) as? CKError)?.code == .zoneNotFound)

            let notes = (0..<3).map { index -> CKRecord in
                let note = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n\(index)", zoneID: zoneID))
                note["rank"] = index
                return note
            }
            let modified = try await result {
                database.modifyRecords(saving: notes, deleting: [], savePolicy: .allKeys, atomically: true, completionHandler: $0)
            }.get()
            #expect(modified.saveResults.count == 3 && modified.saveResults.values.allSatisfy { (try? $0.get()) != nil })

            let missing = CKRecord.ID(recordName: "missing", zoneID: zoneID)
            let fetched = try await result { database.fetch(withRecordIDs: [notes[0].recordID, missing], desiredKeys: ["rank"], completionHandler: $0) }.get()
            #expect(try fetched[notes[0].recordID]?.get()["rank"] as? Int == 0)
            #expect((fetched[missing]?.failure as? CKError)?.code == .unknownItem)

            let query = CKQuery(recordType: "Note", predicate: CKPredicate(value: true))
            query.sortDescriptors = [CKSortDescriptor(key: "rank", ascending: true)]
            let page = try await result { database.fetch(withQuery: query, inZoneWith: zoneID, resultsLimit: 2, completionHandler: $0) }.get()
            #expect(page.matchResults.map(\.0.recordName) == ["n0", "n1"])
            let cursor = try #require(page.queryCursor)
            let rest = try await result { database.fetch(withCursor: cursor, completionHandler: $0) }.get()
            #expect(rest.matchResults.map(\.0.recordName) == ["n2"])
            #expect(rest.queryCursor == nil)

            let subscription = CKRecordZoneSubscription(zoneID: zoneID, subscriptionID: "batch-zone")
            let subscriptions = try await result { database.modifySubscriptions(saving: [subscription], deleting: [], completionHandler: $0) }.get()
            #expect(try subscriptions.saveResults["batch-zone"]?.get().subscriptionID == "batch-zone")
            let fetchedSubscriptions = try await result { database.fetch(withSubscriptionIDs: ["batch-zone"], completionHandler: $0) }.get()
            #expect(fetchedSubscriptions["batch-zone"] != nil)

            // A failure of the whole operation fails the outer result.
            let refused = await result {
                database.fetch(withQuery: query, inZoneWith: CKRecordZone.ID(zoneName: "Nope"), completionHandler: $0)
            }
            #expect((refused.failure as? CKError)?.code == .zoneNotFound)
        }
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
