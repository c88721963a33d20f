import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

@Suite("CKQuery and sort descriptors")
struct CKQueryTests {
    static let here = CKLocation(latitude: 47.3769, longitude: 8.5417)

    @Test("Sort descriptors become wire sort keys; a location sort carries its point")
    func sortDescriptors() throws {
        #expect(
            try CKSortDescriptor(key: "createdAt", ascending: false).wireSortDescriptor
                == Wire.QuerySortDescriptor(key: "createdAt", ascending: false))
        #expect(
            try CKSortDescriptor(key: "title", ascending: true).wireSortDescriptor
                == Wire.QuerySortDescriptor(key: "title", ascending: true))
        #expect(
            try CKSortDescriptor(key: CKRecord.SystemFieldKey.modificationDate, ascending: true).wireSortDescriptor
                == Wire.QuerySortDescriptor(key: "modificationDate", ascending: true))
        let nearest = CKLocationSortDescriptor(key: "location", relativeLocation: Self.here)
        #expect(nearest.ascending)
        #expect(nearest.relativeLocation == Self.here)
        #expect(
            try nearest.wireSortDescriptor
                == Wire.QuerySortDescriptor(key: "location", ascending: true, relativeLocation: Self.here.wireLocation))
        // reversedSortDescriptor is `Any`, as NSSortDescriptor's is.
        let farthest = try #require(nearest.reversedSortDescriptor as? CKLocationSortDescriptor)
        #expect(!farthest.ascending)
        #expect(try farthest.wireSortDescriptor.relativeLocation == Self.here.wireLocation)
        #expect(
            CKSortDescriptor(key: "a", ascending: true).reversedSortDescriptor as? CKSortDescriptor
                == CKSortDescriptor(key: "a", ascending: false))
        #expect(CKSortDescriptor(key: "a", ascending: true) != nearest)
        #expect(Set([CKSortDescriptor(key: "a", ascending: true), CKSortDescriptor(key: "a", ascending: true)]).count == 1)
    }

    @Test(
        "Invalid sort keys are refused with invalidArguments",
        arguments: [
            (nil, "a sort descriptor has no field key (make it with NSSortDescriptor(key:ascending:))"),
            ("a.b", "invalid sort key: key paths (a.b) are not supported by CloudKit; use a field name"),
            ("", "a sort descriptor has no field key (make it with NSSortDescriptor(key:ascending:))"),
            ("recordID", "cannot sort by recordID; sort by a field, creationDate or modificationDate"),
        ] as [(String?, String)])
    func invalidSortKeys(key: String?, message: String) {
        #expect {
            _ = try CKSortDescriptor(key: key, ascending: true).wireSortDescriptor
        } throws: { error in
            (error as? CKError)?.code == .invalidArguments && (error as? CKError)?.message == message
        }
    }

    @Test("A location sort on a date key is refused")
    func locationSortOnDate() {
        #expect(throws: CKError.self) {
            try CKLocationSortDescriptor(key: "creationDate", relativeLocation: Self.here).wireSortDescriptor
        }
    }

    @Test("CloudKit-style code compiles and converts: let query, then set sortDescriptors")
    func appleShape() throws {
        let oneWeekAgo = Date(timeIntervalSince1970: 1_700_000_000)
        let predicate = CKPredicate(format: "category == %@ AND createdAt > %@", "work", oneWeekAgo)
        let query = CKQuery(recordType: "Note", predicate: predicate)
        #expect(query.sortDescriptors == nil)
        query.sortDescriptors = [CKSortDescriptor(key: "createdAt", ascending: false)]
        #expect(query.recordType == "Note")
        #expect(query.predicate == predicate)
        let wire = try query.wireQuery
        #expect(wire.recordType == "Note")
        #expect(wire.predicate == (try predicate.wirePredicate))
        #expect(wire.sortDescriptors == [Wire.QuerySortDescriptor(key: "createdAt", ascending: false)])
        #expect(query.description.contains("category == %@"))
    }

    @Test("CKQuery → Wire.Query → bytes → Wire.Query → CKQuery keeps everything")
    func roundTrip() throws {
        let id = CKRecord.ID(recordName: "owner", zoneID: CKRecordZone.ID(zoneName: "Z", ownerName: "_u"))
        let query = CKQuery(
            recordType: "Place",
            predicate: CKPredicate(
                format: "NOT (kind IN %@) AND rating BETWEEN {1.5, 4.5} AND owner == %@ AND name BEGINSWITH 'Caf' AND "
                    + "self CONTAINS 'coffee' AND distanceToLocation:fromLocation:(location, %@) < 2 AND tags CONTAINS 'wifi' "
                    + "AND creationDate >= %@ AND TRUEPREDICATE AND NOT FALSEPREDICATE",
                ["bar", "club"], id, Self.here, Date(timeIntervalSince1970: 1_000)))
        query.sortDescriptors = [
            CKLocationSortDescriptor(key: "location", relativeLocation: Self.here),
            CKSortDescriptor(key: "rating", ascending: false),
        ]
        let wire = try query.wireQuery
        let decoded = try Wire.Query(serializedBytes: wire.serializedBytes())
        #expect(decoded == wire)
        let back = CKQuery(wire: decoded)
        #expect(back.recordType == "Place")
        #expect(back.predicate.predicateFormat == query.predicate.predicateFormat)
        #expect(back.sortDescriptors == query.sortDescriptors)
        #expect(back.sortDescriptors?.first is CKLocationSortDescriptor)
        #expect(try back.wireQuery == wire)
    }

    @Test("A query without a predicate on the wire is TRUEPREDICATE; no sorts is nil")
    func wireDefaults() throws {
        let query = CKQuery(wire: Wire.Query(recordType: "Note"))
        #expect(query.sortDescriptors == nil)
        #expect(try query.predicate.wirePredicate.node == .truePredicate(Wire.TruePredicate()))
    }

    @Test("An invalid predicate, an empty record type or a bad sort key makes wireQuery throw invalidArguments")
    func invalidQueries() throws {
        let bad = CKQuery(recordType: "Note", predicate: CKPredicate(format: "a OR b"))
        do {
            _ = try bad.wireQuery
            Issue.record("an invalid predicate was converted")
        } catch {
            #expect(error.code == .invalidArguments)
            #expect(error.message == #"predicate "a OR b": position 3: OR is not supported by CloudKit"#)
            #expect(error.userInfo[NSUnderlyingErrorKey] as? CKPredicate.ParseError == bad.predicate.parseError)
        }
        #expect(throws: CKError.self) { try CKQuery(recordType: "", predicate: CKPredicate(value: true)).wireQuery }
        let sorted = CKQuery(recordType: "Note", predicate: CKPredicate(value: true))
        sorted.sortDescriptors = [CKSortDescriptor(key: "a.b", ascending: true)]
        #expect(throws: CKError.self) { try sorted.wireQuery }
    }

    @Test("A query can be shared across tasks")
    func sendable() async {
        let query = CKQuery(recordType: "Note", predicate: CKPredicate(value: true))
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<8 {
                group.addTask { query.sortDescriptors = [CKSortDescriptor(key: "k\(index)", ascending: true)] }
            }
        }
        #expect(query.sortDescriptors?.count == 1)
    }
}
