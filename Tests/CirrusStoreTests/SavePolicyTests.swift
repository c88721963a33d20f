import CirrusWire
import Testing

@testable import CirrusStore

@Suite("Save policies and system fields")
struct SavePolicyTests {
    @Test func aSavedRecordCarriesServerFields() async throws {
        try await withSyncStore(clock: SteppingClock().clock) { storage, _ in
            let first = try #require(try await storage.saveAll([note("n", [field("title", .stringValue("a"))])]).first)
            #expect(!first.recordChangeTag.isEmpty)
            #expect(first.creationDate == Wire.Timestamp(seconds: 1_700_000_000))
            #expect(first.modificationDate == first.creationDate)
            // Stored and returned without a zone: `zone_id` absent is the default zone.
            #expect(first.creatorUserRecordID == Wire.RecordID(recordName: "_alice"))
            #expect(first.lastModifiedUserRecordID == Wire.RecordID(recordName: "_alice"))
            #expect(first.recordID == recordID("n"))

            var edit = first
            edit.fields = [field("title", .stringValue("b"))]
            let second = try #require(try await storage.saveAll([edit]).first)
            #expect(second.recordChangeTag != first.recordChangeTag)
            #expect(second.creationDate == first.creationDate)
            #expect(second.modificationDate == Wire.Timestamp(seconds: 1_700_000_001))
            #expect(second.value("title") == .stringValue("b"))
        }
    }

    @Test func aStaleChangeTagGetsServerRecordChangedWithTheServerRecord() async throws {
        try await withSyncStore { storage, _ in
            let original = try #require(try await storage.saveAll([note("n", [field("v", .int64Value(1))])]).first)
            var winner = original
            winner.fields = [field("v", .int64Value(2))]
            let current = try #require(try await storage.saveAll([winner]).first)

            var loser = original
            loser.fields = [field("v", .int64Value(3))]
            let result = try await storage.modifyRecords(RecordModification(saving: [loser]), in: alice, by: "_alice")
            let error = try #require(result.saveError(0))
            #expect(error.code == .serverRecordChanged)
            #expect(error.serverRecord == current)
            #expect(error.serverRecord?.value("v") == .int64Value(2))
            #expect(error.clientRecord?.value("v") == .int64Value(3))
            #expect(try await storage.fetch(recordID("n")).record?.value("v") == .int64Value(2))
        }
    }

    @Test func savingANewRecordWhoseIDExistsConflicts() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll([note("n", [field("v", .int64Value(1))])])
            let result = try await storage.modifyRecords(
                RecordModification(saving: [note("n", [field("v", .int64Value(9))])]), in: alice, by: "_alice")
            #expect(result.saveError(0)?.code == .serverRecordChanged)
            #expect(result.saveError(0)?.serverRecord?.value("v") == .int64Value(1))
        }
    }

    @Test func updatingARecordThatNoLongerExistsIsUnknownItem() async throws {
        try await withSyncStore { storage, _ in
            let saved = try #require(try await storage.saveAll([note("n")]).first)
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("n")]), in: alice, by: "_alice")
            let result = try await storage.modifyRecords(RecordModification(saving: [saved]), in: alice, by: "_alice")
            #expect(result.saveError(0)?.code == .unknownItem)
        }
    }

    @Test func ifServerRecordUnchangedKeepsKeysNotSentAndRemovesNilKeys() async throws {
        try await withSyncStore { storage, _ in
            let saved = try #require(
                try await storage.saveAll([note("n", [field("a", .int64Value(1)), field("b", .int64Value(2)), field("c", .int64Value(3))])]).first)
            var partial = saved
            partial.fields = [field("a", .int64Value(10)), field("c", nil)]
            let updated = try #require(try await storage.saveAll([partial]).first)
            #expect(updated.keys == ["a", "b"])
            #expect(updated.value("a") == .int64Value(10))
            #expect(updated.value("b") == .int64Value(2))
        }
    }

    @Test func changedKeysWritesOnlyChangedKeysAndIgnoresTheTag() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll([note("n", [field("a", .int64Value(1)), field("b", .int64Value(2)), field("c", .int64Value(3))])])
            var stale = note("n", tag: "stale", [field("a", .int64Value(100)), field("b", .int64Value(200))])
            stale.changedKeys = ["a", "c"]
            let result = try await storage.modifyRecords(
                RecordModification(saving: [stale], savePolicy: .changedKeys), in: alice, by: "_alice")
            let saved = try #require(result.saved(0))
            #expect(saved.keys == ["a", "b"])
            #expect(saved.value("a") == .int64Value(100))
            #expect(saved.value("b") == .int64Value(2))  // not in changedKeys: kept
        }
    }

    @Test func allKeysReplacesEveryFieldAndIgnoresTheTag() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll([note("n", [field("a", .int64Value(1)), field("b", .int64Value(2))])])
            let replacement = note("n", tag: "", [field("c", .stringValue("only"))])
            let result = try await storage.modifyRecords(
                RecordModification(saving: [replacement], savePolicy: .allKeys), in: alice, by: "_alice")
            let saved = try #require(result.saved(0))
            #expect(saved.keys == ["c"])
            #expect(try await storage.fetch(recordID("n")).record?.keys == ["c"])
        }
    }

    @Test func unspecifiedPolicyMeansIfServerRecordUnchanged() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll([note("n")])
            let result = try await storage.modifyRecords(
                RecordModification(saving: [note("n", tag: "bogus")], savePolicy: .unspecified), in: alice, by: "_alice")
            #expect(result.saveError(0)?.code == .serverRecordChanged)
        }
    }

    @Test func savingIntoAMissingZoneIsZoneNotFound() async throws {
        try await withSyncStore { storage, _ in
            let result = try await storage.modifyRecords(
                RecordModification(saving: [note("n", zone: "Nowhere")], deleting: [recordID("m", zone: "Nowhere")]),
                in: alice, by: "_alice")
            #expect(result.saveError(0)?.code == .zoneNotFound)
            #expect(result.deletes.first?.failure?.code == .zoneNotFound)
        }
    }

    @Test func malformedRecordsAreInvalidArguments() async throws {
        try await withSyncStore { storage, _ in
            var noType = note("a")
            noType.recordType = ""
            let badKey = note("b", [field("1bad", .int64Value(1))])
            let noID = Wire.Record(recordType: "Note")
            let result = try await storage.modifyRecords(
                RecordModification(saving: [noType, badKey, noID, note("ok"), note("ok")], isAtomic: false),
                in: alice, by: "_alice")
            #expect(result.saveError(0)?.code == .invalidArguments)
            #expect(result.saveError(1)?.code == .invalidArguments)
            #expect(result.saveError(2)?.code == .invalidArguments)
            #expect(result.saved(3) != nil)
            #expect(result.saveError(4)?.code == .invalidArguments)  // same record twice
        }
    }

    /// A field name is an ASCII letter, then ASCII letters, digits and '_', at most 255 bytes:
    /// in the fields and in `changedKeys`.
    @Test func fieldNamesAreCheckedByteByByte() async throws {
        try await withSyncStore { storage, _ in
            let longest = "a" + String(repeating: "b", count: 254)
            let valid = ["a", "Z", "a1", "a_", "aB9_c", longest]
            // The index markers of the record's own columns and of every field are no field name.
            let invalid = [
                "", "1a", "_a", "a b", "a-b", "é", "aé", "a\u{0}", longest + "c", FieldIndexing.system, FieldIndexing.everything,
            ]
            var records = valid.enumerated().map { note("ok\($0.offset)", [field($0.element, .int64Value(1))]) }
            records += invalid.enumerated().map { note("bad\($0.offset)", [field($0.element, .int64Value(1))]) }
            var changed = note("changed")
            changed.changedKeys = ["fine", "not fine"]
            records.append(changed)
            let result = try await storage.modifyRecords(
                RecordModification(saving: records, isAtomic: false), in: alice, by: "_alice")
            for index in valid.indices {
                #expect(result.saved(index) != nil, "\(valid[index]) was refused")
            }
            for (offset, key) in invalid.enumerated() {
                let failure = result.saveError(valid.count + offset)
                #expect(failure?.code == .invalidArguments, "\(key) was not refused")
                #expect(failure?.message.contains("invalid field name") == true)
            }
            #expect(result.saveError(records.count - 1)?.message == "invalid field name \"not fine\"")
        }
    }

    /// A record name is 1 ... 255 printable ASCII characters (space and `~` included), whether
    /// it is saved or deleted; a zone name 1 ... 255 bytes of UTF-8 without control characters.
    @Test func recordAndZoneNamesAreCheckedByteByByte() async throws {
        let longest = String(repeating: "r", count: 255)
        let validRecordNames = ["a", " ", "~", "a b", "_x", "\u{20}\u{7E}", longest]
        let invalidRecordNames = ["", "\u{0}", "\u{1F}", "\u{7F}", "é", "aé", "a\tb", longest + "r"]
        for name in validRecordNames { #expect(RecordCodec.checkName(name, of: "record") == nil, "\(name)") }
        for name in invalidRecordNames {
            #expect(RecordCodec.checkName(name, of: "record")?.message == "invalid record name \"\(name)\"")
        }
        let validZoneNames = ["z", "é", "Zone 名前", "~\u{80}", String(repeating: "é", count: 127) + "z"]
        let invalidZoneNames = ["", "\u{0}", "\u{1F}", "\u{7F}", "a\nb", String(repeating: "é", count: 128)]
        for name in validZoneNames { #expect(RecordCodec.checkName(name, of: "zone") == nil, "\(name)") }
        for name in invalidZoneNames {
            #expect(RecordCodec.checkName(name, of: "zone")?.message == "invalid zone name \"\(name)\"")
        }
        try await withSyncStore { storage, _ in
            let records = (validRecordNames + invalidRecordNames).map { note($0) }
            let result = try await storage.modifyRecords(
                RecordModification(saving: records, deleting: invalidRecordNames.map { recordID($0) }, isAtomic: false),
                in: alice, by: "_alice")
            for index in validRecordNames.indices {
                #expect(result.saved(index) != nil, "\(validRecordNames[index]) was refused")
            }
            for (offset, name) in invalidRecordNames.enumerated() {
                #expect(result.saveError(validRecordNames.count + offset)?.message == "invalid record name \"\(name)\"")
                #expect(result.deletes[offset].failure?.message == "invalid record name \"\(name)\"")
            }
        }
    }

    @Test func changingTheRecordTypeIsRefused() async throws {
        try await withSyncStore { storage, _ in
            var saved = try #require(try await storage.saveAll([note("n")]).first)
            saved.recordType = "Task"
            let result = try await storage.modifyRecords(RecordModification(saving: [saved]), in: alice, by: "_alice")
            #expect(result.saveError(0)?.code == .invalidArguments)
        }
    }

    @Test func moreThan400ItemsFailWholeAndWriteNothing() async throws {
        try await withSyncStore { storage, _ in
            let records = (0..<300).map { note("r\($0)") }
            let deletes = (0..<101).map { recordID("d\($0)") }
            await #expect(throws: StoreError.self) {
                try await storage.modifyRecords(RecordModification(saving: records, deleting: deletes), in: alice, by: "_alice")
            }
            do {
                _ = try await storage.modifyRecords(RecordModification(saving: records, deleting: deletes), in: alice, by: "_alice")
            } catch let error as StoreError {
                #expect(error.code == .limitExceeded)
            }
            #expect(try await storage.count("records") == 0)
            #expect(try await storage.count("databases") == 0)
            // 400 is fine.
            let ok = try await storage.modifyRecords(
                RecordModification(saving: Array(records), deleting: Array(deletes.prefix(100))), in: alice, by: "_alice")
            #expect(!ok.hasFailures)
            #expect(try await storage.count("records") == 300)
        }
    }

    @Test func deletingAMissingRecordSucceeds() async throws {
        try await withSyncStore { storage, _ in
            let result = try await storage.modifyRecords(RecordModification(deleting: [recordID("ghost")]), in: alice, by: "_alice")
            #expect(result.deletes == [RecordDeletion(id: recordID("ghost"))])
            #expect(try await storage.count("tombstones") == 0)
        }
    }
}
