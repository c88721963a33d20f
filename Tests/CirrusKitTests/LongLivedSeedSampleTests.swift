import CirrusKit
import CirrusModel
import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

/// The long-lived operation sample of Apple's `CKOperation` reference (shared/seeds 000), run as
/// written against the fake server; `print` goes to a recorder and the "Add callback handlers"
/// comment gets its handlers.
@Suite("CloudKit reference sample: long-lived operations")
struct LongLivedSeedSampleTests {
    @Test("fetchAllLongLivedOperationIDs → fetchLongLivedOperation → handlers → container.add")
    func sample() async throws {
        let script = LongLivedScript()
        script.add(LongLivedOperationTests.serverFetch(id: "op-fetch", names: ["a", "b"]))
        let save = Wire.Open(
            operationID: "op-save",
            databaseScope: .private,
            containerIdentifier: "iCloud.test",
            configuration: Wire.OperationConfiguration(isLongLived: true),
            request: .modifyRecords(
                Wire.ModifyRecordsRequest(recordsToSave: [Wire.Record(recordID: Wire.RecordID(recordName: "n1"), recordType: "Note")])
            )
        )
        let saved = Wire.Record(recordID: Wire.RecordID(recordName: "n1"), recordType: "Note", recordChangeTag: "t1")
        script.add(
            .init(
                open: save,
                payloads: [.modifyRecords(.init(callback: .perRecordSave(.init(recordID: saved.recordID, outcome: .record(saved)))))]
            )
        )
        // Listed, but gone (completed and acknowledged elsewhere) by the time it is fetched.
        script.add(LongLivedOperationTests.serverFetch(id: "op-gone", names: ["x"]))
        let peer = try await FakePeer.start(
            reply: { open, connection in
                if case .fetchLongLivedOperation(let request)? = open.request, request.operationID == "op-gone" {
                    return FakeReply(error: Wire.OperationError(code: .unknownOperation, message: "no operation op-gone"))
                }
                return script.reply(open, connection)
            },
            resume: script.resume
        )
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let log = Recorder<String>()
        let print: @Sendable (String) -> Void = { log.append($0) }
        let finished = Recorder<String>()
        let addCallbackHandlers: @Sendable (CKOperation) -> Void = { operation in
            if let fetch = operation as? CKFetchRecordsOperation {
                fetch.perRecordResultBlock = { id, _ in log.append("fetched \(id.recordName)") }
                fetch.fetchRecordsResultBlock = { _ in finished.append(fetch.operationID) }
            } else if let modify = operation as? CKModifyRecordsOperation {
                modify.perRecordSaveBlock = { id, _ in log.append("saved \(id.recordName)") }
                modify.modifyRecordsResultBlock = { _ in finished.append(modify.operationID) }
            }
        }

        // From the seed, verbatim apart from the handlers.
        container.fetchAllLongLivedOperationIDs(completionHandler: { (operationIDs, error) in
            if let error = error {
                print("Error fetching long lived operations: \(error)")
                // Handle error
                return
            }
            guard let identifiers = operationIDs else { return }
            for operationID in identifiers {
                container.fetchLongLivedOperation(withID: operationID, completionHandler: { (operation, error) in
                    if let error = error {
                        print("Error fetching operation: \(operationID)\n\(error)")
                        // Handle error
                        return
                    }
                    guard let operation = operation else { return }
                    // Add callback handlers to operation
                    addCallbackHandlers(operation)
                    container.add(operation)
                })
            }
        })

        try await eventually { finished.count == 2 && log.values.contains { $0.hasPrefix("Error fetching operation: op-gone") } }
        #expect(Set(finished.values) == ["op-fetch", "op-save"])
        let lines = log.values
        #expect(lines.filter { $0.hasPrefix("fetched") } == ["fetched a", "fetched b"])
        #expect(lines.filter { $0.hasPrefix("saved") } == ["saved n1"])
        #expect(Set(peer.resumes.map(\.operationID)) == ["op-fetch", "op-save"])
        #expect(peer.resumes.allSatisfy { $0.lastSeq == 0 })
        // Both results acknowledged.
        try await eventually { peer.cancelFrames.count == 2 }
        #expect(peer.cancelFrames.allSatisfy { $0.cancel.completionAcknowledged })
    }
}
