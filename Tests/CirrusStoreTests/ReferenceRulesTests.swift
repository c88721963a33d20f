import CirrusWire
import Testing

@testable import CirrusStore

/// What CloudKit checks of the references a record holds when it is saved: a parent or a
/// reference stays inside the record's zone, and a `deleteSelf` reference's target exists
/// (stored, or saved by the same operation).
@Suite("Reference rules on save")
struct ReferenceRulesTests {
    private func save(
        _ records: [Wire.Record], atomic: Bool = false, in storage: some RecordSyncStorage
    ) async throws -> RecordModificationResult {
        try await storage.modifyRecords(RecordModification(saving: records, isAtomic: atomic), in: alice, by: "_alice")
    }

    @Test func aReferenceOrParentIntoAnotherZoneIsRefused() async throws {
        try await withSyncStore { storage, _ in
            try await storage.createZone("Other")
            try await storage.saveAll([note("target", zone: "Other"), note("target")])
            let elsewhere = recordID("target", zone: "Other")
            var parented = note("child")
            parented.parent = Wire.Reference(recordID: elsewhere, action: .none)
            let otherOwner = Wire.RecordID(recordName: "target", zoneID: zoneID("_defaultZone", in: bob))
            let result = try await save(
                [
                    note("weak", [field("r", reference(elsewhere, deleteSelf: false))]),
                    note("strong", [field("r", reference(elsewhere))]),
                    note("listed", [field("rs", .referenceList(Wire.ReferenceList(values: [
                        Wire.Reference(recordID: recordID("target"), action: .none),
                        Wire.Reference(recordID: elsewhere, action: .none),
                    ])))]),
                    parented,
                    note("bobs", [field("r", reference(otherOwner, deleteSelf: false))]),
                    note("fine", [field("r", reference(recordID("target"), deleteSelf: false))]),
                ], in: storage)
            for index in 0..<5 {
                let failure = try #require(result.saveError(index))
                #expect(failure.code == .invalidArguments)
                #expect(failure.message.contains("another zone"), "\(failure.message)")
            }
            #expect(result.saved(5) != nil)
            #expect(try await storage.fetch(recordID("weak")).failure?.code == .unknownItem, "nothing of a refused record is stored")
        }
    }

    @Test func aZonelessReferenceNamesTheRecordsOwnZone() async throws {
        try await withSyncStore { storage, _ in
            try await storage.createZone("Z")
            try await storage.saveAll([note("target", zone: "Z")])
            let zoneless = Wire.RecordID(recordName: "target")
            let saved = try await storage.saveAll([note("holder", zone: "Z", [field("r", reference(zoneless))])])
            #expect(saved.count == 1)
        }
    }

    @Test func aDeleteSelfReferenceToNothingIsAReferenceViolation() async throws {
        try await withSyncStore { storage, _ in
            let result = try await save([note("orphan", [field("r", reference(recordID("missing")))])], in: storage)
            let failure = try #require(result.saveError(0))
            #expect(failure.code == .referenceViolation)
            #expect(failure.message.contains("missing"))
            // A plain reference may name a record that does not exist (CloudKit checks only deleteSelf).
            try await storage.saveAll([note("weak", [field("r", reference(recordID("missing"), deleteSelf: false))])])
            // In a list, too.
            let listed = try await save([note("listed", [field("rs", .referenceList(Wire.ReferenceList(values: [
                Wire.Reference(recordID: recordID("missing"), action: .deleteSelf),
            ])))])], in: storage)
            #expect(listed.saveError(0)?.code == .referenceViolation)
            #expect(try await storage.count("cascade_references") == 0)
        }
    }

    @Test(arguments: [false, true])
    func aTargetSavedInTheSameOperationCountsInEitherOrder(atomic: Bool) async throws {
        try await withSyncStore { storage, _ in
            let result = try await save(
                [
                    note("child", [field("r", reference(recordID("parent")))]),  // before its target
                    note("parent"),
                    note("grandchild", [field("r", reference(recordID("child")))]),
                ],
                atomic: atomic, in: storage)
            #expect(result.saves.allSatisfy { $0.failure == nil }, "\(result.saves)")
            let deleted = try await storage.modifyRecords(RecordModification(deleting: [recordID("parent")]), in: alice, by: "_alice")
            #expect(deleted.cascadedDeletions == [recordID("child"), recordID("grandchild")])
        }
    }

    @Test func inAnAtomicZoneAViolationFailsTheOthers() async throws {
        try await withSyncStore { storage, _ in
            let result = try await save(
                [note("fine"), note("orphan", [field("r", reference(recordID("missing")))])], atomic: true, in: storage)
            #expect(result.saveError(0)?.code == .batchRequestFailed)
            #expect(result.saveError(1)?.code == .referenceViolation)
            #expect(try await storage.count("records") == 0)
        }
    }
}
