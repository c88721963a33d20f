import CirrusWire
import Testing

@testable import CirrusStore

@Suite("isAtomic")
struct AtomicTests {
    /// Zone A gets a good save, a conflicting save and a delete; zone B two good saves.
    private func request(atomic: Bool) -> RecordModification {
        RecordModification(
            saving: [note("a1", zone: "A"), note("conflict", zone: "A", tag: "stale"), note("b1", zone: "B"), note("b2", zone: "B")],
            deleting: [recordID("old", zone: "A")],
            isAtomic: atomic)
    }

    private func prepare(_ storage: any SyncStorageUnderTest) async throws {
        try await storage.createZone("A")
        try await storage.createZone("B")
        try await storage.saveAll([note("conflict", zone: "A"), note("old", zone: "A")])
    }

    @Test func atomicFailsTheWholeZoneOnlyAndProceedsWithOthers() async throws {
        try await withSyncStore { storage, _ in
            try await prepare(storage)
            let result = try await storage.modifyRecords(request(atomic: true), in: alice, by: "_alice")
            #expect(result.saveError(0)?.code == .batchRequestFailed)
            #expect(result.saveError(1)?.code == .serverRecordChanged)
            #expect(result.saved(2) != nil)
            #expect(result.saved(3) != nil)
            #expect(result.deletes.first?.failure?.code == .batchRequestFailed)
            #expect(result.hasFailures)
            // Nothing of zone A was written.
            #expect(try await storage.fetch(recordID("a1", zone: "A")).failure?.code == .unknownItem)
            #expect(try await storage.fetch(recordID("old", zone: "A")).record != nil)
            #expect(try await storage.fetch(recordID("b1", zone: "B")).record != nil)
            let changes = try await storage.recordChanges(in: zoneID("A"), of: alice, since: 0, limit: 100, desiredKeys: nil)
            #expect(changes.lastSeq == 2)  // the two setup saves only
            #expect(changes.deleted.isEmpty)
        }
    }

    @Test func nonAtomicWritesEveryItemThatSucceeds() async throws {
        try await withSyncStore { storage, _ in
            try await prepare(storage)
            let result = try await storage.modifyRecords(request(atomic: false), in: alice, by: "_alice")
            #expect(result.saved(0) != nil)
            #expect(result.saveError(1)?.code == .serverRecordChanged)
            #expect(result.saved(2) != nil)
            #expect(result.saved(3) != nil)
            #expect(result.deletes.first?.failure == nil)
            #expect(try await storage.fetch(recordID("a1", zone: "A")).record != nil)
            #expect(try await storage.fetch(recordID("old", zone: "A")).failure?.code == .unknownItem)
        }
    }

    /// A non-atomic group of saves only reads every existing row in one probe: each save
    /// still sees its own record's row (an update, a conflict, a new record, a new record
    /// sending a tag), and a record a save of the same request created is not there for it.
    @Test func nonAtomicSavesOfOneZoneEachSeeTheirOwnStoredRow() async throws {
        try await withSyncStore { storage, _ in
            try await storage.createZone("C")
            let stored = try await storage.saveAll([note("kept", zone: "C"), note("stale", zone: "C")])
            var update = note("kept", zone: "C", [field("title", .stringValue("updated"))])
            update.recordChangeTag = stored[0].recordChangeTag
            let result = try await storage.modifyRecords(
                RecordModification(
                    saving: [
                        update, note("stale", zone: "C", tag: "old"), note("fresh", zone: "C"),
                        note("ghost", zone: "C", tag: "never"),
                    ],
                    isAtomic: false),
                in: alice, by: "_alice")
            let saved = try #require(result.saved(0))
            #expect(saved.recordChangeTag != stored[0].recordChangeTag)
            #expect(saved.creationDate == stored[0].creationDate)
            #expect(result.saveError(1)?.code == .serverRecordChanged)
            #expect(result.saveError(1)?.serverRecord == stored[1])
            #expect(result.saved(2) != nil)
            #expect(result.saveError(3)?.code == .unknownItem)
            #expect(try await storage.fetch(recordID("kept", zone: "C")).record?.fields.first?.value?.kind == .stringValue("updated"))
            #expect(try await storage.fetch(recordID("ghost", zone: "C")).failure?.code == .unknownItem)
        }
    }

    /// Saves without a change tag are taken to be new (the SQLite engine inserts them without
    /// reading their rows first): a name that is taken gets exactly what reading first gives,
    /// under each policy, alone and in a group, and nothing of the taken record is written.
    @Test func savesWithoutATagOfTakenNamesGetWhatReadingFirstGives() async throws {
        try await withSyncStore { storage, _ in
            try await storage.createZone("D")
            let stored = try await storage.saveAll([
                note("taken1", zone: "D", [field("v", .int64Value(1))]),
                note("taken2", zone: "D", [field("v", .int64Value(2))]),
                note("gone", zone: "D"),
            ])
            // A deleted record's name is free again (its tombstone goes).
            _ = try await storage.modifyRecords(
                RecordModification(deleting: [recordID("gone", zone: "D")]), in: alice, by: "_alice")
            let before = try await storage.recordChanges(in: zoneID("D"), of: alice, since: 0, limit: 100, desiredKeys: nil)

            // The default policy: a taken name conflicts, with the stored record, in a group
            // (new names around it) and alone.
            let group = try await storage.modifyRecords(
                RecordModification(
                    saving: [
                        note("new1", zone: "D"), note("taken1", zone: "D", [field("v", .int64Value(10))]),
                        note("gone", zone: "D", [field("v", .int64Value(3))]), note("new2", zone: "D"),
                    ],
                    isAtomic: false),
                in: alice, by: "_alice")
            #expect(result(group, 0) == "saved")
            #expect(group.saveError(1)?.code == .serverRecordChanged)
            #expect(group.saveError(1)?.serverRecord == stored[0])
            #expect(result(group, 2) == "saved")
            #expect(result(group, 3) == "saved")
            for atomic in [false, true] {
                let alone = try await storage.modifyRecords(
                    RecordModification(saving: [note("taken2", zone: "D", [field("v", .int64Value(20))])], isAtomic: atomic),
                    in: alice, by: "_alice")
                #expect(alone.saveError(0)?.code == .serverRecordChanged, "atomic: \(atomic)")
                #expect(alone.saveError(0)?.serverRecord == stored[1], "atomic: \(atomic)")
            }
            #expect(try await storage.fetch(recordID("taken1", zone: "D")).record == stored[0])
            #expect(try await storage.fetch(recordID("taken2", zone: "D")).record == stored[1])

            // All keys: a taken name is overwritten, its creation kept; a group and alone.
            let overwrite = try await storage.modifyRecords(
                RecordModification(
                    saving: [note("taken1", zone: "D", [field("v", .int64Value(11))]), note("new3", zone: "D")],
                    savePolicy: .allKeys, isAtomic: false),
                in: alice, by: "_alice")
            let overwritten = try #require(overwrite.saved(0))
            #expect(overwritten.creationDate == stored[0].creationDate)
            #expect(overwritten.recordChangeTag != stored[0].recordChangeTag)
            #expect(overwritten.value("v") == .int64Value(11))
            #expect(overwrite.saved(1) != nil)
            for (atomic, value) in [(false, Int64(21)), (true, 22)] {
                let single = try await storage.modifyRecords(
                    RecordModification(
                        saving: [note("taken2", zone: "D", [field("v", .int64Value(value))])], savePolicy: .allKeys,
                        isAtomic: atomic),
                    in: alice, by: "_alice")
                #expect(single.saved(0)?.creationDate == stored[1].creationDate, "atomic: \(atomic)")
                #expect(try await storage.fetch(recordID("taken2", zone: "D")).record?.value("v") == .int64Value(value))
            }

            // One row per name; the feed has each name once, "gone" saved again, nothing deleted.
            let changes = try await storage.recordChanges(
                in: zoneID("D"), of: alice, since: before.lastSeq, limit: 100, desiredKeys: nil)
            #expect(Set(changes.changed.compactMap { $0.recordID?.recordName }) == ["new1", "gone", "new2", "taken1", "new3", "taken2"])
            #expect(changes.changed.count == 6)
            #expect(changes.deleted.isEmpty)
            let all = try await storage.recordChanges(in: zoneID("D"), of: alice, since: 0, limit: 100, desiredKeys: nil)
            #expect(all.changed.count == 6)
            #expect(all.deleted.isEmpty)
        }
    }

    private func result(_ result: RecordModificationResult, _ index: Int) -> String {
        result.saved(index) != nil ? "saved" : "\(String(describing: result.saveError(index)))"
    }

    @Test func atomicAppliesToTheDefaultZoneToo() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll([note("x")])
            let result = try await storage.modifyRecords(
                RecordModification(saving: [note("y"), note("x")]), in: alice, by: "_alice")
            #expect(result.saveError(0)?.code == .batchRequestFailed)
            #expect(result.saveError(1)?.code == .serverRecordChanged)
            #expect(try await storage.fetch(recordID("y")).failure?.code == .unknownItem)
        }
    }

    @Test func aFailedAtomicZoneDoesNotKeepItsCascades() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll([note("parent"), note("other"), note("child", [field("p", reference(recordID("parent")))])])
            let result = try await storage.modifyRecords(
                RecordModification(saving: [note("other", tag: "stale")], deleting: [recordID("parent")]),
                in: alice, by: "_alice")
            #expect(result.saveError(0)?.code == .serverRecordChanged)
            #expect(result.deletes.first?.failure?.code == .batchRequestFailed)
            #expect(result.cascadedDeletions.isEmpty)
            #expect(try await storage.fetch(recordID("parent")).record != nil)
            #expect(try await storage.fetch(recordID("child")).record != nil)
        }
    }

    @Test func aMalformedItemFailsItsAtomicZone() async throws {
        try await withSyncStore { storage, _ in
            var bad = note("bad")
            bad.recordType = ""
            let result = try await storage.modifyRecords(
                RecordModification(saving: [note("good"), bad, note("good")]), in: alice, by: "_alice")
            #expect(result.saveError(0)?.code == .batchRequestFailed)
            #expect(result.saveError(1)?.code == .invalidArguments)
            #expect(result.saveError(2)?.code == .invalidArguments)  // the same record twice
            #expect(try await storage.count("records") == 0)
        }
    }
}
