import CirrusWire
import Foundation
import Testing

@testable import CirrusStore

@Suite("Query sort order")
struct QuerySortTests {
    @Test func severalKeysAscendingAndDescendingTiesByRecordName() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll([
                item("e", [("group", .stringValue("b")), ("n", .int64Value(1))]),
                item("d", [("group", .stringValue("a")), ("n", .int64Value(2))]),
                item("c", [("group", .stringValue("b")), ("n", .doubleValue(1.5))]),
                item("b", [("group", .stringValue("a")), ("n", .int64Value(2))]),
                item("a", [("group", .stringValue("B")), ("n", .int64Value(9))]),
            ])
            #expect(try await storage.names(nil, sorts: [Q.sort("group"), Q.sort("n", ascending: false)]) == ["a", "b", "d", "c", "e"])
            #expect(try await storage.names(nil, sorts: [Q.sort("n")]) == ["e", "c", "b", "d", "a"], "int and double together")
            #expect(try await storage.names(nil, sorts: [Q.sort("group", ascending: false), Q.sort("n")]) == ["e", "c", "b", "d", "a"])
        }
    }

    @Test func recordsWithoutTheFieldComeLastEitherWay() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll([
                item("none1"), item("two", [("n", .int64Value(2))]), item("none2", [("other", .int64Value(0))]),
                item("one", [("n", .int64Value(1))]), item("encrypted", [("n", .int64Value(0))]),
            ].map { record in
                var record = record
                if record.recordID?.recordName == "encrypted" { record.fields[0].isEncrypted = true }
                return record
            })
            #expect(try await storage.names(nil, sorts: [Q.sort("n")]) == ["one", "two", "encrypted", "none1", "none2"])
            #expect(try await storage.names(nil, sorts: [Q.sort("n", ascending: false)]) == ["two", "one", "encrypted", "none1", "none2"])
            #expect(try await storage.names(nil, sorts: [Q.sort("neverSeen")]) == ["encrypted", "none1", "none2", "one", "two"])
        }
    }

    @Test func systemDatesSort() async throws {
        try await withQueryStore(clock: SteppingClock(start: 5_000).clock) { storage, _ in
            let saved = try await storage.saveAll([item("z")])
            try await storage.saveAll([item("y")])
            try await storage.saveAll([item("x")])
            #expect(try await storage.names(nil, sorts: [Q.sort("creationDate")]) == ["z", "y", "x"])
            #expect(try await storage.names(nil, sorts: [Q.sort("creationDate", ascending: false)]) == ["x", "y", "z"])
            try await storage.saveAll([saved[0]])  // z modified last
            #expect(try await storage.names(nil, sorts: [Q.sort("modificationDate", ascending: false)]) == ["z", "x", "y"])
            #expect(try await storage.names(nil, sorts: [Q.sort("creationDate")]) == ["z", "y", "x"], "creation stays")
        }
    }

    @Test func withoutSortDescriptorsRecordsComeInTheOrderTheyWereFirstSaved() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll([item("m"), item("c"), item("x")])
            let saved = try await storage.saveAll([item("a")])
            try await storage.saveAll([saved[0]])
            #expect(try await storage.names(nil) == ["m", "c", "x", "a"])
        }
    }

    @Test(arguments: [
        ("tags", "tags holds string list values in this zone; only single strings, numbers and dates sort"),
        ("blob", "blob holds bytes values in this zone; only single strings, numbers and dates sort"),
        ("owner", "owner holds reference values in this zone; only single strings, numbers and dates sort"),
        ("file", "file holds asset values in this zone; only single strings, numbers and dates sort"),
        ("empty", "empty holds int64 list values in this zone; only single strings, numbers and dates sort"),
        ("at", "at holds location values in this zone; only single strings, numbers and dates sort; sort locations by distance from a relative location"),
    ])
    func fieldsThatDoNotSortAreRefused(key: String, message: String) async throws {
        try await withQueryStore { storage, engine in
            guard engine.implementsAssets else { return }
            let content: [UInt8] = [1, 2, 3]
            let asset = Wire.Asset(sha256: Wire.SHA256.hash(content), size: 3, content: .inlineData(content))
            try await storage.saveAll([
                item("one", [("tags", Q.strings("a")), ("blob", .bytesValue([1])), ("title", .stringValue("t"))]),
                item("two", [("owner", reference(recordID("one"), deleteSelf: false)), ("file", .assetValue(asset))]),
                item("three", [("empty", Q.ints()), ("at", Q.location(1, 2)), ("title", .int64Value(3))]),
            ])
            let error = await storage.refusal(Q.query(nil, sorts: [Q.sort("title"), Q.sort(key)]))
            #expect(error?.code == .invalidArguments)
            #expect(error?.message == "sort descriptor 2 (\"\(key)\"): \(message)")
            // Another record type in the zone may hold anything.
            #expect(await storage.refusal(Q.query(nil, type: "Other", sorts: [Q.sort(key)])) == nil)
        }
    }

    @Test func aDistanceSortNeedsALocationField() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll([item("one", [("title", .stringValue("t"))])])
            let error = await storage.refusal(Q.query(nil, sorts: [Q.sort("title", from: Wire.Location(latitude: 1, longitude: 1))]))
            #expect(error?.message == "sort descriptor 1 (\"title\"): title holds string values in this zone; a relative location sorts a location field")
        }
    }
}
