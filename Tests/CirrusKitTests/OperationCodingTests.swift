import CirrusKit
import CirrusModel
import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

/// Requests, events and results of the record and zone operations, against scripted replies.
@Suite("Record and zone operations on the wire")
struct OperationCodingTests {
    static let zone = Wire.RecordZoneID(zoneName: "Notes", ownerName: "_fake")

    static func wireID(_ name: String) -> Wire.RecordID {
        Wire.RecordID(recordName: name, zoneID: zone)
    }

    static func recordID(_ name: String) -> CKRecord.ID {
        CKRecord.ID(recordName: name, zoneID: CKRecordZone.ID(zoneName: "Notes", ownerName: "_fake"))
    }

    static func wireRecord(_ name: String, tag: String = "t2", title: String = "saved") -> Wire.Record {
        Wire.Record(
            recordID: wireID(name),
            recordType: "Note",
            recordChangeTag: tag,
            fields: [Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue(title)))]
        )
    }

    static func error(_ code: Wire.ErrorCode, _ message: String = "") -> Wire.OperationError {
        Wire.OperationError(code: code, message: message)
    }

    static func partial(_ items: [(Wire.RecordID, Wire.ErrorCode)]) -> Wire.OperationError {
        Wire.OperationError(
            code: .partialFailure,
            message: "some items failed",
            partialErrors: items.map { Wire.ItemError(item: .recordID($0.0), error: error($0.1)) }
        )
    }

    func container(_ peer: FakePeer) -> CKContainer {
        CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
    }

    // MARK: - CKModifyRecordsOperation

    @Test("Modify: request fields, per-record save and delete callbacks, partialFailure with errors by item ID")
    func modifyRecords() async throws {
        let conflict = Wire.OperationError(
            code: .serverRecordChanged, message: "changed", serverRecord: Self.wireRecord("b", tag: "t9", title: "theirs")
        )
        let peer = try await FakePeer.start { _, _ in
            FakeReply(
                payloads: [
                    .modifyRecords(.init(callback: .perRecordProgress(.init(recordID: Self.wireID("a"), progress: 1.0)))),
                    .modifyRecords(.init(callback: .perRecordSave(.init(recordID: Self.wireID("a"), outcome: .record(Self.wireRecord("a")))))),
                    .modifyRecords(.init(callback: .perRecordSave(.init(recordID: Self.wireID("b"), outcome: .error(conflict))))),
                    .modifyRecords(.init(callback: .perRecordDelete(.init(recordID: Self.wireID("c"))))),
                ],
                error: Self.partial([(Self.wireID("b"), .serverRecordChanged)])
            )
        }
        defer { Task { await peer.stop() } }
        let a = CKRecord(recordType: "Note", recordID: Self.recordID("a"))
        a["title"] = "mine"
        let b = CKRecord(recordType: "Note", recordID: Self.recordID("b"))
        b["title"] = "mine too"
        let operation = CKModifyRecordsOperation(recordsToSave: [a, b], recordIDsToDelete: [Self.recordID("c")])
        operation.savePolicy = .allKeys
        operation.isAtomic = false
        operation.clientChangeTokenData = Data([1, 2, 3])
        let progress = Recorder<Double>()
        let saves = Recorder<(CKRecord.ID, Result<CKRecord, any Error>)>()
        let deletes = Recorder<(CKRecord.ID, Result<Void, any Error>)>()
        let result = Recorder<Result<Void, any Error>>()
        operation.perRecordProgressBlock = { record, value in
            #expect(record === a)
            progress.append(value)
        }
        operation.perRecordSaveBlock = { saves.append(($0, $1)) }
        operation.perRecordDeleteBlock = { deletes.append(($0, $1)) }
        operation.modifyRecordsResultBlock = { result.append($0) }
        await runToCompletion(operation, on: self.container(peer).privateCloudDatabase)

        let open = try #require(peer.opens.first)
        guard case .modifyRecords(let request) = open.request else {
            Issue.record("expected a ModifyRecordsRequest, got \(String(describing: open.request))")
            return
        }
        #expect(open.databaseScope == .private)
        #expect(request.recordsToSave.map(\.recordID?.recordName) == ["a", "b"])
        #expect(request.recordsToSave.first?.fields.first?.value?.kind == .stringValue("mine"))
        #expect(request.recordIDsToDelete.map(\.recordName) == ["c"])
        #expect(request.savePolicy == .allKeys)
        #expect(request.isAtomic == false)
        #expect(request.clientChangeToken == [1, 2, 3])

        #expect(progress.values == [1.0])
        #expect(saves.values.map(\.0) == [Self.recordID("a"), Self.recordID("b")])
        let saved = try #require(try saves.values.first?.1.get())
        #expect(saved.recordChangeTag == "t2")
        #expect(saved["title"] as? String == "saved")
        let failure = try #require(saves.values.last?.1)
        #expect(failure.failureCode == .serverRecordChanged)
        if case .failure(let error as CKError) = failure {
            #expect(error.serverRecord?["title"] as? String == "theirs")
            #expect(error.serverRecord?.recordChangeTag == "t9")
        }
        #expect(deletes.values.map(\.0) == [Self.recordID("c")])
        #expect((try? deletes.values.first?.1.get()) != nil)

        let overall = try #require(result.values.first)
        #expect(overall.failureCode == .partialFailure)
        if case .failure(let error as CKError) = overall {
            let byID = try #require(error.partialErrorsByItemID)
            #expect((byID[Self.recordID("b")] as? CKError)?.code == .serverRecordChanged)
            #expect(byID.count == 1)
        }
    }

    @Test("Modify: the default save policy and atomicity are sent as CloudKit's defaults")
    func modifyDefaults() async throws {
        let peer = try await FakePeer.start()
        defer { Task { await peer.stop() } }
        let operation = CKModifyRecordsOperation(recordsToSave: [CKRecord(recordType: "Note", recordID: Self.recordID("a"))])
        await runToCompletion(operation, on: self.container(peer).publicCloudDatabase)
        let open = try #require(peer.opens.first)
        #expect(open.databaseScope == .public)
        guard case .modifyRecords(let request) = open.request else {
            Issue.record("expected a ModifyRecordsRequest")
            return
        }
        #expect(request.savePolicy == .ifServerRecordUnchanged)
        #expect(request.isAtomic == true)
        #expect(request.clientChangeToken.isEmpty)
    }

    @Test("Modify: a saved record sent back without its fields (fields_as_sent) gets those the operation sent")
    func modifyFillsInTheFieldsItSent() async throws {
        let bare = Wire.Record(recordID: Self.wireID("a"), recordType: "Note", recordChangeTag: "t7")
        let peer = try await FakePeer.start { _, _ in
            FakeReply(payloads: [
                .modifyRecords(.init(callback: .perRecordSave(.init(recordID: Self.wireID("a"), outcome: .record(bare), fieldsAsSent: true)))),
                // A server that says so of a record this operation never sent.
                .modifyRecords(.init(callback: .perRecordSave(.init(recordID: Self.wireID("z"), outcome: .record(bare), fieldsAsSent: true)))),
            ])
        }
        defer { Task { await peer.stop() } }
        let a = CKRecord(recordType: "Note", recordID: Self.recordID("a"))
        a["title"] = "mine"
        a["count"] = 3
        let operation = CKModifyRecordsOperation(recordsToSave: [a])
        let saves = Recorder<(CKRecord.ID, Result<CKRecord, any Error>)>()
        operation.perRecordSaveBlock = { saves.append(($0, $1)) }
        await runToCompletion(operation, on: self.container(peer).privateCloudDatabase)
        guard case .modifyRecords(let request)? = peer.opens.first?.request else {
            Issue.record("expected a ModifyRecordsRequest")
            return
        }
        #expect(request.omitFieldsAsSent)
        #expect(saves.values.map(\.0) == [Self.recordID("a"), CKRecord.ID(recordName: "z", zoneID: Self.recordID("a").zoneID)])
        let saved = try #require(try saves.values.first?.1.get())
        #expect(saved !== a)
        #expect(saved.recordChangeTag == "t7")
        #expect(saved["title"] as? String == "mine")
        #expect(saved["count"] as? Int == 3)
        #expect(saved.changedKeys().isEmpty)
        #expect(saves.values.last?.1.failureCode == .internalError)
    }

    @Test("Modify: only failures are asked for when no callback would see a saved or deleted record")
    func modifyAsksForFailuresOnlyWhenNothingLooks() async throws {
        let peer = try await FakePeer.start()
        defer { Task { await peer.stop() } }
        let database = self.container(peer).privateCloudDatabase
        func failuresOnly(_ configure: (CKModifyRecordsOperation) -> Void) async throws -> Bool {
            let operation = CKModifyRecordsOperation(recordsToSave: [CKRecord(recordType: "Note", recordID: Self.recordID("a"))])
            configure(operation)
            await runToCompletion(operation, on: database)
            guard case .modifyRecords(let request)? = peer.opens.last?.request else {
                Issue.record("expected a ModifyRecordsRequest")
                return false
            }
            return request.failuresOnly
        }
        #expect(try await failuresOnly { $0.modifyRecordsResultBlock = { _ in } })
        #expect(try await failuresOnly { $0.perRecordProgressBlock = { _, _ in } })
        #expect(!(try await failuresOnly { $0.perRecordSaveBlock = { _, _ in } }))
        #expect(!(try await failuresOnly { $0.perRecordDeleteBlock = { _, _ in } }))
        #expect(!(try await failuresOnly { $0.perRecordCompletionBlock = { _, _ in } }))
        #expect(!(try await failuresOnly { $0.modifyRecordsCompletionBlock = { _, _, _ in } }))
        // A long-lived operation's fetched copy may set blocks later.
        #expect(!(try await failuresOnly { $0.configuration.isLongLived = true }))
        #expect(!(try await failuresOnly { operation in
            let group = CKOperationGroup()
            group.defaultConfiguration.isLongLived = true
            operation.group = group
        }))
        // Said explicitly, it wins either way.
        #expect(try await failuresOnly {
            $0.perRecordSaveBlock = { _, _ in }
            $0.reportsSuccessfulItems = false
        })
        #expect(!(try await failuresOnly { $0.reportsSuccessfulItems = true }))
    }

    // MARK: - CKFetchRecordsOperation
    // MARK: - CKFetchRecordsOperation

    @Test("Fetch: desiredKeys, records and unknownItem per ID")
    func fetchRecords() async throws {
        let peer = try await FakePeer.start { _, _ in
            FakeReply(payloads: [
                .fetchRecords(.init(callback: .perRecordProgress(.init(recordID: Self.wireID("a"), progress: 0.5)))),
                .fetchRecords(.init(callback: .perRecordResult(.init(recordID: Self.wireID("a"), outcome: .record(Self.wireRecord("a")))))),
                .fetchRecords(
                    .init(callback: .perRecordResult(.init(recordID: Self.wireID("x"), outcome: .error(Self.error(.unknownItem, "no such record")))))
                ),
            ])
        }
        defer { Task { await peer.stop() } }
        let operation = CKFetchRecordsOperation(recordIDs: [Self.recordID("a"), Self.recordID("x")])
        operation.desiredKeys = ["title"]
        let progress = Recorder<(CKRecord.ID, Double)>()
        let results = Recorder<(CKRecord.ID, Result<CKRecord, any Error>)>()
        let result = Recorder<Result<Void, any Error>>()
        operation.perRecordProgressBlock = { progress.append(($0, $1)) }
        operation.perRecordResultBlock = { results.append(($0, $1)) }
        operation.fetchRecordsResultBlock = { result.append($0) }
        await runToCompletion(operation, on: self.container(peer).privateCloudDatabase)

        guard case .fetchRecords(let request) = peer.opens.first?.request else {
            Issue.record("expected a FetchRecordsRequest")
            return
        }
        #expect(request.recordIDs.map(\.recordName) == ["a", "x"])
        #expect(request.desiredKeys == ["title"])
        #expect(request.desiredKeysSpecified)
        #expect(progress.values.map(\.1) == [0.5])
        #expect(results.values.map(\.0) == [Self.recordID("a"), Self.recordID("x")])
        #expect((try? results.values.first?.1.get())?["title"] as? String == "saved")
        #expect(results.values.last?.1.failureCode == .unknownItem)
        #expect((try? result.values.first?.get()) != nil)
    }

    @Test("Fetch: nil desiredKeys means all keys")
    func fetchAllKeys() async throws {
        let peer = try await FakePeer.start()
        defer { Task { await peer.stop() } }
        let operation = CKFetchRecordsOperation(recordIDs: [Self.recordID("a")])
        await runToCompletion(operation, on: self.container(peer).privateCloudDatabase)
        guard case .fetchRecords(let request) = peer.opens.first?.request else {
            Issue.record("expected a FetchRecordsRequest")
            return
        }
        #expect(!request.desiredKeysSpecified)
    }

    // MARK: - Zones

    @Test("Modify zones: saves, deletes and their callbacks")
    func modifyZones() async throws {
        let peer = try await FakePeer.start { _, _ in
            FakeReply(payloads: [
                .modifyRecordZones(
                    .init(
                        callback: .perRecordZoneSave(
                            .init(
                                zoneID: Self.zone,
                                outcome: .zone(Wire.RecordZone(zoneID: Self.zone, capabilities: .init(fetchChanges: true, atomic: true)))
                            )
                        )
                    )
                ),
                .modifyRecordZones(.init(callback: .perRecordZoneDelete(.init(zoneID: Wire.RecordZoneID(zoneName: "Old", ownerName: "_fake"))))),
            ])
        }
        defer { Task { await peer.stop() } }
        let zoneID = CKRecordZone.ID(zoneName: "Notes", ownerName: "_fake")
        let oldID = CKRecordZone.ID(zoneName: "Old", ownerName: "_fake")
        let operation = CKModifyRecordZonesOperation(recordZonesToSave: [CKRecordZone(zoneID: zoneID)], recordZoneIDsToDelete: [oldID])
        let saves = Recorder<(CKRecordZone.ID, Result<CKRecordZone, any Error>)>()
        let deletes = Recorder<CKRecordZone.ID>()
        let result = Recorder<Result<Void, any Error>>()
        operation.perRecordZoneSaveBlock = { saves.append(($0, $1)) }
        operation.perRecordZoneDeleteBlock = { id, _ in deletes.append(id) }
        operation.modifyRecordZonesResultBlock = { result.append($0) }
        await runToCompletion(operation, on: self.container(peer).privateCloudDatabase)

        guard case .modifyRecordZones(let request) = peer.opens.first?.request else {
            Issue.record("expected a ModifyRecordZonesRequest")
            return
        }
        #expect(request.recordZonesToSave.map(\.zoneID?.zoneName) == ["Notes"])
        #expect(request.recordZoneIDsToDelete.map(\.zoneName) == ["Old"])
        #expect(saves.values.map(\.0) == [zoneID])
        let zone = try #require(try saves.values.first?.1.get())
        #expect(zone.capabilities.contains(.atomic))
        #expect(deletes.values == [oldID])
        #expect((try? result.values.first?.get()) != nil)
    }

    @Test("Fetch zones by ID and all zones")
    func fetchZones() async throws {
        let peer = try await FakePeer.start { _, _ in
            FakeReply(payloads: [
                .fetchRecordZones(.init(callback: .perRecordZoneResult(.init(zoneID: Self.zone, outcome: .zone(Wire.RecordZone(zoneID: Self.zone)))))),
                .fetchRecordZones(
                    .init(
                        callback: .perRecordZoneResult(
                            .init(zoneID: Wire.RecordZoneID(zoneName: "Gone", ownerName: "_fake"), outcome: .error(Self.error(.zoneNotFound)))
                        )
                    )
                ),
            ])
        }
        defer { Task { await peer.stop() } }
        let byID = CKFetchRecordZonesOperation(recordZoneIDs: [CKRecordZone.ID(zoneName: "Notes"), CKRecordZone.ID(zoneName: "Gone")])
        let results = Recorder<(CKRecordZone.ID, Result<CKRecordZone, any Error>)>()
        byID.perRecordZoneResultBlock = { results.append(($0, $1)) }
        await runToCompletion(byID, on: self.container(peer).privateCloudDatabase)
        #expect(results.values.count == 2)
        #expect(results.values.last?.1.failureCode == .zoneNotFound)
        guard case .fetchRecordZones(let request) = peer.opens.first?.request else {
            Issue.record("expected a FetchRecordZonesRequest")
            return
        }
        #expect(request.recordZoneIDs.count == 2)
        #expect(!request.fetchAllRecordZones)

        let all = CKFetchRecordZonesOperation.fetchAllRecordZonesOperation()
        await runToCompletion(all, on: self.container(peer).privateCloudDatabase)
        guard case .fetchRecordZones(let allRequest) = peer.opens.last?.request else {
            Issue.record("expected a FetchRecordZonesRequest")
            return
        }
        #expect(allRequest.fetchAllRecordZones)
    }

    // MARK: - Async API

    @Test("Async API: save, record(for:), modifyRecords, deleteRecord over the operations")
    func asyncRecords() async throws {
        let peer = try await FakePeer.start { open, _ in
            switch open.request {
            case .modifyRecords(let request):
                let saves: [Wire.Event.Payload] = request.recordsToSave.compactMap { record in
                    guard let id = record.recordID else { return nil }
                    if id.recordName == "bad" {
                        return .modifyRecords(.init(callback: .perRecordSave(.init(recordID: id, outcome: .error(Self.error(.invalidArguments))))))
                    }
                    var saved = record
                    saved.recordChangeTag = "t1"
                    return .modifyRecords(.init(callback: .perRecordSave(.init(recordID: id, outcome: .record(saved)))))
                }
                let deletes: [Wire.Event.Payload] = request.recordIDsToDelete.map {
                    .modifyRecords(.init(callback: .perRecordDelete(.init(recordID: $0))))
                }
                let failed = request.recordsToSave.compactMap(\.recordID).filter { $0.recordName == "bad" }
                return FakeReply(
                    payloads: saves + deletes,
                    error: failed.isEmpty ? nil : Self.partial(failed.map { ($0, .invalidArguments) })
                )
            case .fetchRecords(let request):
                return FakeReply(
                    payloads: request.recordIDs.map { id in
                        .fetchRecords(
                            .init(
                                callback: .perRecordResult(
                                    id.recordName == "missing"
                                        ? .init(recordID: id, outcome: .error(Self.error(.unknownItem)))
                                        : .init(recordID: id, outcome: .record(Wire.Record(recordID: id, recordType: "Note", recordChangeTag: "t1")))
                                )
                            )
                        )
                    }
                )
            default:
                return FakeReply(error: Self.error(.serverRejectedRequest))
            }
        }
        defer { Task { await peer.stop() } }
        let database = self.container(peer).privateCloudDatabase
        let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n1"))
        record["title"] = "hello"
        let saved = try await database.save(record)
        #expect(saved.recordChangeTag == "t1")
        #expect(saved["title"] as? String == "hello")

        let fetched = try await database.record(for: CKRecord.ID(recordName: "n1"))
        #expect(fetched.recordID.recordName == "n1")
        let missing = await #expect(throws: CKError.self) { try await database.record(for: CKRecord.ID(recordName: "missing")) }
        #expect(missing?.code == .unknownItem)

        let results = try await database.records(for: [CKRecord.ID(recordName: "n1"), CKRecord.ID(recordName: "missing")], desiredKeys: [])
        #expect(results.count == 2)
        #expect(results[CKRecord.ID(recordName: "missing")]?.failureCode == .unknownItem)

        let bad = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "bad"))
        let (saveResults, deleteResults) = try await database.modifyRecords(
            saving: [record, bad], deleting: [CKRecord.ID(recordName: "old")], savePolicy: .changedKeys, atomically: false
        )
        #expect((try? saveResults[record.recordID]?.get()) != nil)
        #expect(saveResults[bad.recordID]?.failureCode == .invalidArguments)
        #expect((try? deleteResults[CKRecord.ID(recordName: "old")]?.get()) != nil)

        let deleted = try await database.deleteRecord(withID: CKRecord.ID(recordName: "old"))
        #expect(deleted.recordName == "old")

        let rejected = await #expect(throws: CKError.self) { try await database.allRecordZones() }
        #expect(rejected?.code == .serverRejectedRequest)
    }

    @Test("Async API: zones")
    func asyncZones() async throws {
        let peer = try await FakePeer.start { open, _ in
            switch open.request {
            case .modifyRecordZones(let request):
                return FakeReply(
                    payloads: request.recordZonesToSave.map { zone in
                        .modifyRecordZones(.init(callback: .perRecordZoneSave(.init(zoneID: zone.zoneID, outcome: .zone(zone)))))
                    }
                        + request.recordZoneIDsToDelete.map { .modifyRecordZones(.init(callback: .perRecordZoneDelete(.init(zoneID: $0)))) }
                )
            case .fetchRecordZones:
                return FakeReply(payloads: [
                    .fetchRecordZones(.init(callback: .perRecordZoneResult(.init(zoneID: Self.zone, outcome: .zone(Wire.RecordZone(zoneID: Self.zone))))))
                ])
            default:
                return FakeReply(error: Self.error(.serverRejectedRequest))
            }
        }
        defer { Task { await peer.stop() } }
        let database = self.container(peer).privateCloudDatabase
        let zone = try await database.save(CKRecordZone(zoneName: "Notes"))
        #expect(zone.zoneID.zoneName == "Notes")
        let all = try await database.allRecordZones()
        #expect(all.map(\.zoneID.zoneName) == ["Notes"])
        let one = try await database.recordZone(for: CKRecordZone.ID(zoneName: "Notes", ownerName: "_fake"))
        #expect(one.zoneID.ownerName == "_fake")
        let deleted = try await database.deleteRecordZone(withID: CKRecordZone.ID(zoneName: "Old"))
        #expect(deleted.zoneName == "Old")
        let (saves, deletes) = try await database.modifyRecordZones(saving: [CKRecordZone(zoneName: "A")], deleting: [CKRecordZone.ID(zoneName: "B")])
        #expect(saves.count == 1)
        #expect(deletes.count == 1)
    }

    @Test("Async API: cancelling the task cancels the operation")
    func asyncCancellation() async throws {
        let peer = try await FakePeer.start { _, _ in FakeReply(hang: true) }
        defer { Task { await peer.stop() } }
        let database = self.container(peer).privateCloudDatabase
        let task = Task { try await database.record(for: CKRecord.ID(recordName: "a")) }
        try await eventually { peer.opens.count == 1 }
        task.cancel()
        let error = await #expect(throws: CKError.self) { try await task.value }
        #expect(error?.code == .operationCancelled)
        try await eventually { peer.log.withLockedValue { $0.cancels.count } == 1 }
    }
}
