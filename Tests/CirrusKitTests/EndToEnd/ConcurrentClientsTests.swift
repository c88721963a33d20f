import CirrusKit
import CirrusModel
import Foundation
import NIOConcurrencyHelpers
import Testing

@Suite("Many clients at once")
struct ConcurrentClientsTests {
    /// 50 clients (alternating two users), each with its own container and connection, run 20
    /// operations each — saves, then a fetch of everything it saved — and every answer is right.
    @Test func fiftyClientsTimesTwentyOperations() async throws {
        try await withStack { container in
            let failures = NIOLockedValueBox<[String]>([])
            await withTaskGroup(of: Void.self) { group in
                for client in 0..<50 {
                    group.addTask {
                        let user = client % 2 == 0 ? "alice" : "bob"
                        let database = container(user).privateCloudDatabase
                        var ids: [CKRecord.ID] = []
                        do {
                            for operation in 0..<19 {
                                let record = CKRecord(
                                    recordType: "Item",
                                    recordID: CKRecord.ID(recordName: "c\(client)-op\(operation)")
                                )
                                record["client"] = client
                                record["operation"] = operation
                                _ = try await database.save(record)
                                ids.append(record.recordID)
                            }
                            let fetched = try await database.records(for: ids)
                            for (index, id) in ids.enumerated() {
                                let record = try fetched[id]?.get()
                                if record?["client"] as? Int != client || record?["operation"] as? Int != index {
                                    failures.withLockedValue { $0.append("client \(client): wrong \(id.recordName)") }
                                }
                            }
                        } catch {
                            failures.withLockedValue { $0.append("client \(client): \(error)") }
                        }
                    }
                }
            }
            #expect(failures.withLockedValue { $0 } == [])
            // Users stay apart: alice sees her 25 clients' records, none of bob's.
            let aliceSees = try await container("alice").privateCloudDatabase.records(
                for: [CKRecord.ID(recordName: "c0-op0"), CKRecord.ID(recordName: "c1-op0")]
            )
            #expect((try? aliceSees[CKRecord.ID(recordName: "c0-op0")]?.get()) != nil)
            #expect((try? aliceSees[CKRecord.ID(recordName: "c1-op0")]?.get()) == nil)
        }
    }
}
