import CirrusWire
import Foundation
import Testing

@testable import CirrusStore

@Suite("Query full-text search and distance")
struct QueryTextAndDistanceTests {
    private func desserts(_ storage: any QueryStorageUnderTest) async throws {
        try await storage.saveAll([
            item("creme", [("title", .stringValue("Crème Brûlée")), ("tags", Q.strings("French", "custard"))]),
            item("pie", [("title", .stringValue("Apple pie")), ("notes", .stringValue("with CREME fraiche"))]),
            item("tart", [("title", .stringValue("Tarte Tatin")), ("tags", Q.strings("french"))]),
            item("numbers", [("title", .int64Value(42)), ("notes", .stringValue("nothing sweet"))]),
            item("bare"),
        ])
    }

    @Test func wordsMatchIgnoringCaseAndDiacritics() async throws {
        try await withQueryStore { storage, _ in
            try await desserts(storage)
            #expect(try await storage.names(Q.text("creme")) == ["creme", "pie"])
            #expect(try await storage.names(Q.text("BRULEE")) == ["creme"])
            #expect(try await storage.names(Q.text("brûlée")) == ["creme"])
            #expect(try await storage.names(Q.text("FRENCH")) == ["creme", "tart"], "string lists count")
            #expect(try await storage.names(Q.text("42")) == [], "only strings are searched")
            #expect(try await storage.names(Q.text("crem")) == [], "whole words")
        }
    }

    @Test func everyWordMustOccurInSomeStringField() async throws {
        try await withQueryStore { storage, _ in
            try await desserts(storage)
            #expect(try await storage.names(Q.text("creme custard")) == ["creme"], "title and a tag")
            #expect(try await storage.names(Q.text("apple creme")) == ["pie"], "title and notes")
            #expect(try await storage.names(Q.text("  crème,   FRENCH! ")) == ["creme"], "punctuation separates words")
            #expect(try await storage.names(Q.text("creme tatin")) == [])
            #expect(try await storage.names(Q.not(Q.text("creme"))) == ["tart", "numbers", "bare"])
            #expect(try await storage.names(Q.and(Q.text("french"), Q.cmp("title", .beginsWith, .stringValue("Tarte")))) == ["tart"])
        }
    }

    @Test func theTextIndexFollowsSavesAndDeletes() async throws {
        try await withQueryStore { storage, _ in
            try await storage.createZone("Z")
            let saved = try await storage.saveAll([item("n", [("title", .stringValue("old words"))])])
            try await storage.saveAll([item("z", zone: "Z", [("title", .stringValue("zone words"))])])
            var changed = saved[0]
            changed.fields = [field("title", .stringValue("new words"))]
            try await storage.saveAll([changed])
            #expect(try await storage.names(Q.text("old")) == [])
            #expect(try await storage.names(Q.text("new words")) == ["n"])
            #expect(try await storage.names(Q.text("words"), zone: "Z") == ["z"])
            #expect(try await storage.count("record_text") == 2)
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("n")]), in: alice, by: "_alice")
            #expect(try await storage.names(Q.text("new")) == [])
            _ = try await storage.modifyZones(saving: [], deleting: [zoneID("Z")], in: alice)
            #expect(try await storage.count("record_text") == 0)
        }
    }

    private static let paris = (48.8566, 2.3522)
    private static let london = (51.5074, -0.1278)  // 343.5 km from Paris
    private static let berlin = (52.5200, 13.4050)  // 877.5 km from Paris

    private func cities(_ storage: any QueryStorageUnderTest) async throws {
        try await storage.saveAll([
            item("paris", [("at", Q.location(Self.paris.0, Self.paris.1))]),
            item("london", [("at", Q.location(Self.london.0, Self.london.1))]),
            item("berlin", [("at", Q.location(Self.berlin.0, Self.berlin.1))]),
            item("nowhere"),
            item("list", [("at", .locationList(Wire.LocationList(values: [Wire.Location(latitude: 48.8566, longitude: 2.3522)])))]),
        ])
    }

    @Test func distanceToLocationInMeters() async throws {
        try await withQueryStore { storage, _ in
            try await cities(storage)
            let (lat, lon) = Self.paris
            #expect(try await storage.names(Q.near("at", lat, lon, within: 1)) == ["paris"])
            #expect(try await storage.names(Q.near("at", lat, lon, within: 343_000)) == ["paris"])
            #expect(try await storage.names(Q.near("at", lat, lon, within: 344_000)) == ["paris", "london"])
            #expect(try await storage.names(Q.near("at", lat, lon, within: 900_000)) == ["paris", "london", "berlin"])
            #expect(try await storage.names(Q.near("at", lat, lon, within: 344_000, .greater)) == ["berlin"])
            #expect(try await storage.names(Q.near("at", lat, lon, within: 0, .lessOrEqual)) == ["paris"])
            #expect(try await storage.names(Q.near("at", lat, lon, within: 0, .greaterOrEqual)) == ["paris", "london", "berlin"])
            #expect(try await storage.names(Q.not(Q.near("at", lat, lon, within: 344_000))) == ["berlin", "nowhere", "list"])
            let meters = QueryGeometry.distance(Self.paris.0, Self.paris.1, Self.london.0, Self.london.1)
            #expect(abs(meters - 343_500) < 1_000)
        }
    }

    @Test func distanceAcrossTheAntimeridianAndNearAPole() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll([
                item("east", [("at", Q.location(0, 179.9))]),
                item("west", [("at", Q.location(0, -179.9))]),
                item("pole", [("at", Q.location(89.9, 180))]),
                item("opposite", [("at", Q.location(89.9, 0))]),
            ])
            #expect(try await storage.names(Q.near("at", 0, 179.95, within: 30_000)) == ["east", "west"])
            #expect(try await storage.names(Q.near("at", 0, -179.95, within: 30_000)) == ["east", "west"])
            #expect(try await storage.names(Q.near("at", 89.95, 90, within: 20_000)) == ["pole", "opposite"])
        }
    }

    @Test func locationsSortByDistanceMissingOnesLast() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll([
                item("nowhere"),
                item("paris", [("at", Q.location(Self.paris.0, Self.paris.1))]),
                item("london", [("at", Q.location(Self.london.0, Self.london.1))]),
                item("berlin", [("at", Q.location(Self.berlin.0, Self.berlin.1))]),
            ])
            let berlin = Wire.Location(latitude: Self.berlin.0, longitude: Self.berlin.1)
            #expect(try await storage.names(nil, sorts: [Q.sort("at", from: berlin)]) == ["berlin", "paris", "london", "nowhere"])
            #expect(
                try await storage.names(nil, sorts: [Q.sort("at", ascending: false, from: berlin)])
                    == ["london", "paris", "berlin", "nowhere"])
            #expect(
                try await storage.names(Q.near("at", Self.paris.0, Self.paris.1, within: 400_000), sorts: [Q.sort("at", from: berlin)])
                    == ["paris", "london"])
        }
    }
}
