import CirrusKit
import CirrusModel
import CirrusTestSupport
import Foundation
import NIOConcurrencyHelpers
import Testing

@Suite("Connections cut by a proxy")
struct FaultInjectionTests {
    @Test func throughTheProxyOperationsWorkAndACutFailsOnlyWhatWasInFlight() async throws {
        try await withStack(clock: ManualClock()) { _, internals in
            // The first connection is cut after 3,000 bytes from the server; later ones never.
            let connections = NIOLockedValueBox(0)
            let proxy = try await CuttingProxy.start(targetPort: internals.port) {
                connections.withLockedValue { count in
                    count += 1
                    return count == 1 ? 3_000 : nil
                }
            }
            let database = CKContainer(
                identifier: "iCloud.com.example.notes", configuration: TestCertificates.client(port: proxy.port, user: "alice")
            ).privateCloudDatabase

            let records = (0..<100).map { i -> CKRecord in
                let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n\(i)"))
                record["title"] = String(repeating: "t", count: 100)
                return record
            }
            // Far more than 3,000 bytes of per-record events: the cut lands mid-operation.
            do {
                _ = try await database.modifyRecords(saving: records, deleting: [])
                Issue.record("the cut must fail the operation in flight")
            } catch let error as CKError {
                #expect(error.code == .networkFailure)
            }
            #expect(proxy.cutCount == 1)
            // The next operation reconnects; what the server committed is there.
            let fetched = try await database.records(for: records.map(\.recordID))
            #expect(fetched.values.filter { (try? $0.get()) != nil }.count == 100)
            #expect(proxy.acceptedCount == 2)
            await proxy.stop()
        }
    }
}
