@testable import CirrusServer
import CirrusStore
import CirrusWire
import Foundation
import Testing

/// Which records of a zone shared by hierarchy a participant sees: those whose parent chain
/// reaches a root, however deep, decided with parents read from the store or found among the
/// records asked about; a chain that ends at a missing record, at a record without a parent,
/// or goes round in a loop is not shared.
@Suite("Shared database: records decided by their parent chains")
struct SharedRecordsTests {
    typealias Helpers = SharedLongLivedAccessTests

    /// Alice's zone: `root` (the share's root) ← `child` ← `grandchild` ← `great`; `orphan`
    /// under a record that does not exist; `loner` without a parent; `a` and `b` each the
    /// other's parent; `s1` the share.
    static func withZone(_ body: (SharedRecords, [String: Wire.Record]) async throws -> Void) async throws {
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("cirrus-shared-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }
        _ = try await storage.modifyZones(saving: [Wire.RecordZone(zoneID: Helpers.albums)], deleting: [], in: Helpers.alice)
        let records = [
            Helpers.record("root"), Helpers.record("child", parent: "root"), Helpers.record("grandchild", parent: "child"),
            Helpers.record("great", parent: "grandchild"), Helpers.record("orphan", parent: "missing"),
            Helpers.record("loner"), Helpers.record("a", parent: "b"), Helpers.record("b", parent: "a"),
        ]
        let result = try await storage.modifyRecords(RecordModification(saving: records), in: Helpers.alice, by: "_alice")
        #expect(!result.hasFailures, "\(result)")
        var byName: [String: Wire.Record] = [:]
        for record in records { byName[record.recordID?.recordName ?? ""] = record }
        byName["s1"] = Wire.Record(recordID: Wire.RecordID(recordName: "s1", zoneID: Helpers.albums), recordType: "cloudkit.share")
        let shared = SharedRecords(
            storage: storage, database: Helpers.alice, zoneID: Helpers.albums, isZoneWide: false, roots: ["root"],
            shareNames: ["s1"])
        try await body(shared, byName)
    }

    @Test func chainsAreFollowedThroughStoredParentsToTheRoot() async throws {
        try await Self.withZone { shared, records in
            let names = ["great", "grandchild", "child", "root", "s1", "orphan", "loner", "a", "b"]
            let decided = try await shared.shared(names.compactMap { records[$0] })
            #expect(decided == [true, true, true, true, true, false, false, false, false])
        }
    }

    @Test func aDeepRecordAloneIsDecidedByReadingItsParents() async throws {
        try await Self.withZone { shared, records in
            let great = try #require(records["great"])
            let a = try #require(records["a"])
            let orphan = try #require(records["orphan"])
            #expect(try await shared.shared([great]) == [true])
            #expect(try await shared.shared([a]) == [false])
            #expect(try await shared.shared([orphan]) == [false])
        }
    }

    @Test func aParentAmongTheRecordsDecidesItsChildrenAsTheStoredOneWould() async throws {
        try await Self.withZone { shared, records in
            // `grandchild` as asked about says its parent is `loner`, which reaches no root:
            // the records asked about are what decides, not the stored version.
            var moved = try #require(records["grandchild"])
            moved.parent = Wire.Reference(recordID: Wire.RecordID(recordName: "loner", zoneID: Helpers.albums), action: .none)
            let great = try #require(records["great"])
            #expect(try await shared.shared([great, moved]) == [false, false])
        }
    }

    @Test func aZoneSharedWholeSharesEveryRecord() async throws {
        try await Self.withZone { shared, records in
            let whole = SharedRecords(
                storage: shared.storage, database: shared.database, zoneID: shared.zoneID, isZoneWide: true, roots: [],
                shareNames: [])
            let loner = try #require(records["loner"])
            let orphan = try #require(records["orphan"])
            #expect(try await whole.shared([loner, orphan]) == [true, true])
        }
    }
}
