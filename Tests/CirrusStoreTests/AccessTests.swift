import CirrusWire
import Testing

@testable import CirrusStore

@Suite("Databases and access")
struct AccessTests {
    @Test func privateDatabasesNeverSeeEachOther() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll([note("same", [field("who", .stringValue("alice"))])], in: alice, by: "_alice")
            try await storage.saveAll([note("same", in: bob, [field("who", .stringValue("bob"))])], in: bob, by: "_bob")
            #expect(try await storage.fetch(recordID("same"), in: alice).record?.value("who") == .stringValue("alice"))
            #expect(try await storage.fetch(recordID("same", in: bob), in: bob).record?.value("who") == .stringValue("bob"))
            // Alice naming Bob's zone from her database finds nothing.
            #expect(try await storage.fetch(recordID("same", in: bob), in: alice).failure?.code == .zoneNotFound)

            try await storage.createZone("Secret", in: bob)
            #expect(try await storage.fetchAllZones(in: alice).count == 1)
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("same")]), in: alice, by: "_alice")
            #expect(try await storage.fetch(recordID("same", in: bob), in: bob).record != nil)
        }
    }

    @Test func thePublicDatabaseIsReadableByAllButWritableByTheCreatorOnly() async throws {
        try await withSyncStore { storage, _ in
            let saved = try #require(
                try await storage.saveAll([note("post", in: publicDB, [field("t", .stringValue("hi"))])], in: publicDB, by: "_alice").first)
            #expect(saved.creatorUserRecordID?.recordName == "_alice")
            // Any user reads it (the fetch has no user: anyone authenticated may read).
            #expect(try await storage.fetch(recordID("post", in: publicDB), in: publicDB).record == saved)

            var edit = saved
            edit.fields = [field("t", .stringValue("hijacked"))]
            let save = try await storage.modifyRecords(RecordModification(saving: [edit]), in: publicDB, by: "_bob")
            #expect(save.saveError(0)?.code == .permissionFailure)
            let forced = try await storage.modifyRecords(RecordModification(saving: [edit], savePolicy: .allKeys), in: publicDB, by: "_bob")
            #expect(forced.saveError(0)?.code == .permissionFailure)
            let delete = try await storage.modifyRecords(RecordModification(deleting: [recordID("post", in: publicDB)]), in: publicDB, by: "_bob")
            #expect(delete.deletes.first?.failure?.code == .permissionFailure)
            #expect(try await storage.fetch(recordID("post", in: publicDB), in: publicDB).record?.value("t") == .stringValue("hi"))

            // The creator may.
            let mine = try await storage.modifyRecords(RecordModification(saving: [edit]), in: publicDB, by: "_alice")
            #expect(mine.saved(0)?.lastModifiedUserRecordID?.recordName == "_alice")
            let gone = try await storage.modifyRecords(RecordModification(deleting: [recordID("post", in: publicDB)]), in: publicDB, by: "_alice")
            #expect(gone.deletes.first?.failure == nil)
        }
    }

    /// In the public database's default zone a record named like a user is that user's
    /// `Users` record: only they save it, only as a `Users` record, and nobody deletes it.
    @Test func onlyAUserSavesTheirUsersRecordAndNobodyDeletesIt() async throws {
        try await withSyncStore { storage, _ in
            func users(_ name: String) -> Wire.Record {
                Wire.Record(recordID: recordID(name, in: publicDB), recordType: "Users")
            }
            let byAlice = try await storage.modifyRecords(RecordModification(saving: [users("_bob")]), in: publicDB, by: "_alice")
            #expect(byAlice.saveError(0)?.code == .permissionFailure)
            let asNote = try await storage.modifyRecords(
                RecordModification(saving: [note("_bob", in: publicDB)]), in: publicDB, by: "_bob")
            #expect(asNote.saveError(0)?.code == .invalidArguments)
            #expect(try await storage.saveAll([users("_bob")], in: publicDB, by: "_bob").first?.recordType == "Users")
            for (name, user) in [("_bob", "_bob"), ("_bob", "_alice"), ("_carol", "_alice")] {
                let delete = try await storage.modifyRecords(
                    RecordModification(deleting: [recordID(name, in: publicDB)]), in: publicDB, by: user)
                #expect(delete.deletes.first?.failure?.code == .permissionFailure, "\(user) deleting \(name)")
            }
            #expect(try await storage.fetch(recordID("_bob", in: publicDB), in: publicDB).record != nil)
        }
    }

    @Test func containersAreSeparate() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll([note("n")])
            let other = DatabaseKey.private(container: "iCloud.other", user: "_alice")
            #expect(try await storage.fetch(recordID("n"), in: other).failure?.code == .unknownItem)
        }
    }

    @Test func namingAnotherUsersZoneWritesNothingThere() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll([note("mine", [field("v", .int64Value(1))])])
            // Bob, in his own database, names Alice's default zone.
            let intruder = Wire.Record(recordID: recordID("mine"), recordType: "Note", fields: [field("v", .int64Value(666))])
            let result = try await storage.modifyRecords(
                RecordModification(saving: [intruder], deleting: [recordID("mine")], savePolicy: .allKeys), in: bob, by: "_bob")
            #expect(result.saveError(0)?.code == .zoneNotFound)
            #expect(result.deletes.first?.failure?.code == .zoneNotFound)
            #expect(try await storage.fetch(recordID("mine"), in: bob).failure?.code == .zoneNotFound)
            #expect(try await storage.fetch(recordID("mine")).record?.value("v") == .int64Value(1))
        }
    }
}
