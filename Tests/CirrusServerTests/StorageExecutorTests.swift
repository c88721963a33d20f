import CirrusServer
import CirrusStore
import CirrusWire
import Foundation
import Testing

let container = "iCloud.com.example.notes"

/// Runs an in-process server with the SQLite storage in a temporary directory.
func withStorageServer(_ body: (Int) async throws -> Void) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-exec-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let storage = try SQLiteStorage(directory: directory)
    defer { try? storage.close() }
    try await withServer(configure: { $0.executor = StorageExecutor(storage: storage) }) { _, port in
        try await body(port)
    }
}

let defaultZone = Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "__defaultOwner__")

func recordID(_ name: String, zone: Wire.RecordZoneID = defaultZone) -> Wire.RecordID {
    Wire.RecordID(recordName: name, zoneID: zone)
}

func note(_ name: String, title: String, tag: String = "", zone: Wire.RecordZoneID = defaultZone) -> Wire.Record {
    Wire.Record(
        recordID: recordID(name, zone: zone),
        recordType: "Note",
        recordChangeTag: tag,
        fields: [Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue(title)))]
    )
}

/// A connected client that runs one operation at a time and collects its events.
struct OperationClient {
    let client: TestClient
    var nextStreamID: UInt64 = 1

    static func connect(port: Int, user: String) async throws -> OperationClient {
        let client = try await TestClient.connect(port: port, user: user)
        _ = try await client.handshake()
        return OperationClient(client: client)
    }

    mutating func run(
        _ request: Wire.Open.Request,
        scope: Wire.DatabaseScope = .private,
        container: String = container
    ) async throws -> (events: [Wire.Event.Payload], complete: Wire.Complete) {
        let streamID = self.nextStreamID
        self.nextStreamID += 2
        let open = Wire.Open(
            operationID: UUID().uuidString,
            databaseScope: scope,
            containerIdentifier: container,
            initialWindow: 1_000,
            request: request
        )
        try await self.client.send(Wire.Frame(streamID: streamID, kind: .open(open)))
        var events: [Wire.Event.Payload] = []
        while true {
            let frame = try await self.client.nextFrame()
            #expect(frame.streamID == streamID)
            switch frame.kind {
            case .event(let event):
                #expect(event.seq == UInt64(events.count + 1))
                if let payload = event.payload { events.append(payload) }
            case .complete(let complete):
                #expect(complete.lastSeq == UInt64(events.count))
                return (events, complete)
            default:
                Issue.record("unexpected \(frame)")
            }
        }
    }

    mutating func save(_ records: [Wire.Record], policy: Wire.SavePolicy = .unspecified, scope: Wire.DatabaseScope = .private)
        async throws -> (saves: [Wire.ModifyRecordsPerRecordSave], complete: Wire.Complete)
    {
        let (events, complete) = try await self.run(
            .modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: records, savePolicy: policy)),
            scope: scope
        )
        let saves = events.compactMap { payload -> Wire.ModifyRecordsPerRecordSave? in
            if case .modifyRecords(let event) = payload, case .perRecordSave(let save) = event.callback { return save }
            return nil
        }
        return (saves, complete)
    }

    mutating func fetch(_ ids: [Wire.RecordID], scope: Wire.DatabaseScope = .private) async throws
        -> (outcomes: [Wire.RecordOutcome], complete: Wire.Complete)
    {
        let (events, complete) = try await self.run(.fetchRecords(Wire.FetchRecordsRequest(recordIDs: ids)), scope: scope)
        let outcomes = events.compactMap { payload -> Wire.RecordOutcome? in
            if case .fetchRecords(let event) = payload, case .perRecordResult(let outcome) = event.callback { return outcome }
            return nil
        }
        return (outcomes, complete)
    }
}

func savedRecord(_ save: Wire.ModifyRecordsPerRecordSave?) -> Wire.Record? {
    if case .record(let record) = save?.outcome { return record }
    return nil
}

func fetchedRecord(_ outcome: Wire.RecordOutcome?) -> Wire.Record? {
    if case .record(let record) = outcome?.outcome { return record }
    return nil
}

private func itemError(_ outcome: Wire.RecordOutcome?) -> Wire.OperationError? {
    if case .error(let error) = outcome?.outcome { return error }
    return nil
}

@Suite("Record and zone operations over the wire, stored in SQLite")
struct StorageExecutorTests {
    @Test func saveThenFetchKeepsTheClientsIDs() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            let (saves, complete) = try await alice.save([note("n1", title: "Groceries"), note("n2", title: "Ünïcødé ✈︎")])
            #expect(complete.error == nil)
            #expect(saves.count == 2)
            let first = try #require(savedRecord(saves.first))
            #expect(first.recordID == recordID("n1"), "IDs come back as the client sent them")
            #expect(!first.recordChangeTag.isEmpty)
            #expect(first.creationDate != nil)

            let (outcomes, fetchComplete) = try await alice.fetch([recordID("n2"), recordID("n1")])
            #expect(fetchComplete.error == nil)
            #expect(outcomes.map(\.recordID) == [recordID("n2"), recordID("n1")])
            #expect(fetchedRecord(outcomes.first)?.fields.first?.value?.kind == .stringValue("Ünïcødé ✈︎"))
            await alice.client.close()
        }
    }

    @Test func staleChangeTagIsAPartialFailureWithTheServerRecord() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            let tag = try #require(savedRecord(try await alice.save([note("n1", title: "v1")]).saves.first)).recordChangeTag
            _ = try await alice.save([note("n1", title: "v2", tag: tag)])
            let (saves, complete) = try await alice.save([note("n1", title: "v3 from a stale copy", tag: tag)])
            #expect(complete.error?.code == .partialFailure)
            #expect(complete.error?.partialErrors.first?.item == .recordID(recordID("n1")))
            guard case .error(let error) = saves.first?.outcome else {
                Issue.record("expected a per-record error")
                return
            }
            #expect(error.code == .serverRecordChanged)
            #expect(error.serverRecord?.fields.first?.value?.kind == .stringValue("v2"))
            await alice.client.close()
        }
    }

    @Test func failuresOnlyReportsTheItemsThatFailAndNothingElse() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            _ = try await alice.save([note("taken", title: "first")])
            let request = Wire.ModifyRecordsRequest(
                recordsToSave: [note("n1", title: "one"), note("taken", title: "again"), note("n2", title: "two")],
                recordIDsToDelete: [recordID("n0"), recordID("gone")],
                isAtomic: false, failuresOnly: true)
            let (events, complete) = try await alice.run(.modifyRecords(request))
            // One event, the conflict; the saves and the deletes that succeeded say nothing.
            #expect(events.count == 1)
            guard case .modifyRecords(let payload) = events.first, case .perRecordSave(let save) = payload.callback,
                case .error(let error) = save.outcome
            else {
                Issue.record("expected the conflict's event, got \(events)")
                return
            }
            #expect(save.recordID == recordID("taken"))
            #expect(error.code == .serverRecordChanged)
            #expect(complete.lastSeq == 1)
            #expect(complete.error?.code == .partialFailure)
            #expect(complete.error?.partialErrors.map(\.item) == [.recordID(recordID("taken"))])
            let (outcomes, _) = try await alice.fetch([recordID("n1"), recordID("n2"), recordID("taken")])
            #expect(outcomes.compactMap(fetchedRecord).map { $0.fields.first?.value?.kind } == [
                .stringValue("one"), .stringValue("two"), .stringValue("first"),
            ])
            // Nothing failing: no event at all, and a plain success.
            let quiet = Wire.ModifyRecordsRequest(recordsToSave: [note("n3", title: "three")], failuresOnly: true)
            let (none, done) = try await alice.run(.modifyRecords(quiet))
            #expect(none.isEmpty)
            #expect(done.error == nil && done.lastSeq == 0)
            await alice.client.close()
        }
    }

    @Test func omitFieldsAsSentLeavesOutOnlyFieldsTheClientHas() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            var both = note("old", title: "kept")
            both.fields.append(Wire.RecordField(key: "body", value: Wire.FieldValue(kind: .stringValue("stored"))))
            _ = try await alice.save([both])
            // A new record: stored as sent. A changed-keys save of "old": its stored fields are
            // the body it had and the title sent, not what was sent.
            var titleOnly = note("old", title: "changed")
            titleOnly.changedKeys = ["title"]
            for (record, policy, asSent) in [(note("new", title: "fresh"), Wire.SavePolicy.allKeys, true), (titleOnly, .changedKeys, false)] {
                let request = Wire.ModifyRecordsRequest(recordsToSave: [record], savePolicy: policy, omitFieldsAsSent: true)
                let (events, complete) = try await alice.run(.modifyRecords(request))
                #expect(complete.error == nil)
                guard case .modifyRecords(let payload) = events.first, case .perRecordSave(let save) = payload.callback,
                    case .record(let saved) = save.outcome
                else {
                    Issue.record("expected a saved record, got \(events)")
                    continue
                }
                #expect(save.fieldsAsSent == asSent)
                // A record without fields goes out written directly; either way it reads the same.
                #expect(save.recordID == record.recordID && saved.recordID == record.recordID)
                #expect(saved.recordType == "Note" && saved.creationDate != nil && saved.modificationDate != nil)
                #expect(saved.creatorUserRecordID != nil && saved.lastModifiedUserRecordID == saved.creatorUserRecordID)
                #expect(!saved.recordChangeTag.isEmpty)
                #expect(saved.fields.map(\.key).sorted() == (asSent ? [] : ["body", "title"]))
            }
            // Without the flag every saved record carries its fields.
            let (plain, _) = try await alice.save([note("plain", title: "p")])
            #expect(plain.first?.fieldsAsSent == false)
            #expect(savedRecord(plain.first)?.fields.count == 1)
            await alice.client.close()
        }
    }

    @Test func privateDatabasesAreSeparate() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            var bob = try await OperationClient.connect(port: port, user: "bob")
            _ = try await alice.save([note("secret", title: "alice's")])
            let (outcomes, complete) = try await bob.fetch([recordID("secret")])
            #expect(itemError(outcomes.first)?.code == .unknownItem, "looks like not found, nothing leaks")
            #expect(complete.error?.code == .partialFailure)
            await alice.client.close()
            await bob.client.close()
        }
    }

    @Test func publicDatabaseIsReadableByAllWritableByTheCreator() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            var bob = try await OperationClient.connect(port: port, user: "bob")
            let saved = try #require(savedRecord(try await alice.save([note("pub", title: "hello")], scope: .public).saves.first))
            let (outcomes, _) = try await bob.fetch([recordID("pub")], scope: .public)
            #expect(fetchedRecord(outcomes.first)?.fields.first?.value?.kind == .stringValue("hello"))
            let (saves, _) = try await bob.save([note("pub", title: "bob was here", tag: saved.recordChangeTag)], scope: .public)
            guard case .error(let error) = saves.first?.outcome else {
                Issue.record("bob must not modify alice's public record")
                return
            }
            #expect(error.code == .permissionFailure)
            await alice.client.close()
            await bob.client.close()
        }
    }

    @Test func zonesCanBeSavedFetchedAndDeleted() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            let zoneID = Wire.RecordZoneID(zoneName: "Work", ownerName: "__defaultOwner__")
            let (saveEvents, saveComplete) = try await alice.run(
                .modifyRecordZones(Wire.ModifyRecordZonesRequest(recordZonesToSave: [Wire.RecordZone(zoneID: zoneID)]))
            )
            #expect(saveComplete.error == nil)
            #expect(saveEvents.count == 1)
            _ = try await alice.save([note("w1", title: "in Work", zone: zoneID)])

            let (allEvents, _) = try await alice.run(.fetchRecordZones(Wire.FetchRecordZonesRequest(fetchAllRecordZones: true)))
            let zoneIDs = allEvents.compactMap { payload -> Wire.RecordZoneID? in
                if case .fetchRecordZones(let event) = payload, case .perRecordZoneResult(let outcome) = event.callback {
                    return outcome.zoneID
                }
                return nil
            }
            #expect(Set(zoneIDs) == [zoneID, defaultZone])

            let (_, deleteComplete) = try await alice.run(
                .modifyRecordZones(Wire.ModifyRecordZonesRequest(recordZoneIDsToDelete: [zoneID]))
            )
            #expect(deleteComplete.error == nil)
            let (outcomes, _) = try await alice.fetch([recordID("w1", zone: zoneID)])
            #expect([.zoneNotFound, .unknownItem].contains(itemError(outcomes.first)?.code), "the zone's records went with it")
            await alice.client.close()
        }
    }

    @Test func tooManyItemsIsRefusedWhole() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            let records = (0..<401).map { note("bulk-\($0)", title: "x") }
            let (saves, complete) = try await alice.save(records)
            #expect(saves.isEmpty)
            #expect(complete.error?.code == .limitExceeded)
            let (outcomes, _) = try await alice.fetch([recordID("bulk-0")])
            #expect(itemError(outcomes.first)?.code == .unknownItem, "nothing was written")
            await alice.client.close()
        }
    }

    @Test(arguments: [
        ("", Wire.DatabaseScope.private, Wire.ErrorCode.badContainer),
        (container, .unspecified, .badDatabase),
    ])
    func badDatabaseIsRefused(containerName: String, scope: Wire.DatabaseScope, expected: Wire.ErrorCode) async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            let (_, complete) = try await alice.run(.fetchRecords(Wire.FetchRecordsRequest()), scope: scope, container: containerName)
            #expect(complete.error?.code == expected)
            await alice.client.close()
        }
    }

    @Test func kindsNotRunYetAreRefusedByName() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            // Without an asset store, the asset kinds are not run.
            let (_, complete) = try await alice.run(.uploadAsset(Wire.UploadAssetRequest()))
            #expect(complete.error?.code == .serverRejectedRequest)
            #expect(complete.error?.message.contains("uploadAsset") == true)
            await alice.client.close()
        }
    }
}
