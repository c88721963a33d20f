import CirrusWire
import Foundation
import Testing

@testable import CirrusStore

/// Predicate and query builders for the query tests.
enum Q {
    static func cmp(_ key: String, _ op: Wire.ComparisonOperator, _ value: Wire.FieldValue.Kind?) -> Wire.QueryPredicate {
        Wire.QueryPredicate(node: .comparison(Wire.ComparisonPredicate(
            key: key, comparisonOperator: op, value: value.map { Wire.FieldValue(kind: $0) })))
    }

    static func and(_ operands: Wire.QueryPredicate...) -> Wire.QueryPredicate { and(operands) }

    static func and(_ operands: [Wire.QueryPredicate]) -> Wire.QueryPredicate {
        Wire.QueryPredicate(node: .andPredicate(Wire.AndPredicate(operands: operands)))
    }

    static func not(_ operand: Wire.QueryPredicate) -> Wire.QueryPredicate {
        Wire.QueryPredicate(node: .notPredicate(Wire.NotPredicate(operand: operand)))
    }

    static let all = Wire.QueryPredicate(node: .truePredicate(Wire.TruePredicate()))
    static let none = Wire.QueryPredicate(node: .falsePredicate(Wire.FalsePredicate()))

    static func text(_ text: String) -> Wire.QueryPredicate {
        Wire.QueryPredicate(node: .textSearch(Wire.TextSearchPredicate(text: text)))
    }

    static func near(
        _ key: String, _ latitude: Double, _ longitude: Double, within radius: Double,
        _ op: Wire.ComparisonOperator = .less
    ) -> Wire.QueryPredicate {
        Wire.QueryPredicate(node: .distance(Wire.DistancePredicate(
            key: key, fromLocation: Wire.Location(latitude: latitude, longitude: longitude), radiusMeters: radius,
            comparisonOperator: op)))
    }

    static func sort(_ key: String, ascending: Bool = true, from location: Wire.Location? = nil) -> Wire.QuerySortDescriptor {
        Wire.QuerySortDescriptor(key: key, ascending: ascending, relativeLocation: location)
    }

    static func query(
        _ predicate: Wire.QueryPredicate? = nil, type: String = "Note", sorts: [Wire.QuerySortDescriptor] = [],
        format: String = ""
    ) -> Wire.Query {
        var predicate = predicate
        predicate?.format = format
        return Wire.Query(recordType: type, predicate: predicate, sortDescriptors: sorts)
    }

    static func strings(_ values: String...) -> Wire.FieldValue.Kind { .stringList(Wire.StringList(values: values)) }
    static func ints(_ values: Int64...) -> Wire.FieldValue.Kind { .int64List(Wire.Int64List(values: values)) }
    static func doubles(_ values: Double...) -> Wire.FieldValue.Kind { .doubleList(Wire.DoubleList(values: values)) }
    static func date(_ seconds: Int64) -> Wire.FieldValue.Kind { .dateValue(Wire.Timestamp(seconds: seconds, nanos: 0)) }
    static func dates(_ seconds: Int64...) -> Wire.FieldValue.Kind {
        .dateList(Wire.TimestampList(values: seconds.map { Wire.Timestamp(seconds: $0, nanos: 0) }))
    }
    static func location(_ latitude: Double, _ longitude: Double) -> Wire.FieldValue.Kind {
        .locationValue(Wire.Location(latitude: latitude, longitude: longitude))
    }
}

extension RecordQueryStorage {
    /// Every page of a query, in order.
    func queryAll(
        _ query: Wire.Query, zone: String = "_defaultZone", in key: DatabaseKey = alice, desiredKeys: [String]? = nil,
        limit: Int = 400
    ) async throws -> [Wire.Record] {
        var page = try await queryRecords(query, in: zoneID(zone, in: key), of: key, desiredKeys: desiredKeys, limit: limit)
        var records = page.records
        while let cursor = page.cursor {
            page = try await continueQuery(cursor, in: key, desiredKeys: .sameAsQuery, limit: limit)
            records += page.records
        }
        return records
    }

    /// The record names every page of a query returns, in order.
    func names(
        _ predicate: Wire.QueryPredicate?, type: String = "Note", sorts: [Wire.QuerySortDescriptor] = [],
        zone: String = "_defaultZone", in key: DatabaseKey = alice, limit: Int = 400
    ) async throws -> [String] {
        try await queryAll(Q.query(predicate, type: type, sorts: sorts), zone: zone, in: key, limit: limit)
            .map { $0.recordID?.recordName ?? "?" }
    }

    /// The message of the StoreError a query throws; nil when it succeeds.
    func refusal(_ query: Wire.Query, zone: String = "_defaultZone") async -> StoreError? {
        do {
            _ = try await queryRecords(query, in: zoneID(zone), of: alice, desiredKeys: nil, limit: 10)
            return nil
        } catch let error as StoreError {
            return error
        } catch {
            Issue.record("unexpected \(error)")
            return nil
        }
    }
}

/// A record of type `type` named `name` with `fields` (key, value).
func item(
    _ name: String, type: String = "Note", zone: String = "_defaultZone", in key: DatabaseKey = alice,
    _ fields: [(String, Wire.FieldValue.Kind)] = []
) -> Wire.Record {
    Wire.Record(
        recordID: recordID(name, zone: zone, in: key), recordType: type,
        fields: fields.map { field($0.0, $0.1) })
}
