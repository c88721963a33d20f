import CirrusKit
import CirrusModel
import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

@Suite("configuredWith: a configuration and group for the convenience calls of a body")
struct ConfiguredWithTests {
    @Test func theBodysCallsRunWithTheConfigurationAndGroupAndOthersDoNot() async throws {
        let peer = try await FakePeer.start { _, _ in FakeReply(payloads: OperationLifecycleTests.fetchResults(["a"])) }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let database = container.privateCloudDatabase
        let configuration = CKOperation.Configuration()
        configuration.timeoutIntervalForRequest = 12
        let group = CKOperationGroup()
        group.name = "Initial Sync"
        let id = CKRecord.ID(recordName: "a")

        let inside = try await database.configuredWith(configuration: configuration, group: group) { database in
            try await database.record(for: id)
        }
        #expect(inside.recordID == id)
        // A completion-handler call in a container's body, on one of its databases.
        let handled = await container.configuredWith(group: group) { container in
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                container.privateCloudDatabase.fetch(withRecordID: id) { record, _ in continuation.resume(returning: record != nil) }
            }
        }
        #expect(handled)
        _ = try await database.record(for: id)  // outside any body

        let opens = peer.opens
        try #require(opens.count == 3)
        #expect(opens[0].configuration?.timeoutIntervalForRequestMs == 12_000)
        #expect(opens[0].group?.name == "Initial Sync")
        #expect(opens[1].group?.name == "Initial Sync")
        #expect(opens[1].configuration?.timeoutIntervalForRequestMs == nil)
        #expect(opens[2].group == nil)
        #expect(opens[2].configuration?.timeoutIntervalForRequestMs == nil)
    }
}
