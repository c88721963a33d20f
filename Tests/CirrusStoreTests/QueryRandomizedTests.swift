import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

@testable import CirrusStore

/// Random records, predicate trees and sort descriptors.
private struct RandomQueries {
    static let words = ["apple", "Apple", "APRICOT", "crème", "creme", "Brûlée", "zoë", "Zoe", "kiwi", "pear", "b", "épée"]
    static let strings = ["", "a", "apple", "Apple", "apricot", "b", "banana", "épée", "e\u{301}pée", "zoë kiwi", "pear tree", "ß"]
    static let targets = ["x", "y", "z"]

    var rng: SplitMix64

    init(seed: UInt64) { rng = SplitMix64(seed: seed) }

    // MARK: Records

    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }
    mutating func pick<T>(_ values: [T]) -> T { values[Int.random(in: 0..<values.count, using: &rng)] }
    private mutating func number() -> Wire.FieldValue.Kind {
        chance(0.5) ? .int64Value(Int64.random(in: -4...4, using: &rng)) : .doubleValue(Double(Int.random(in: -8...8, using: &rng)) / 2)
    }
    private mutating func date() -> Wire.Timestamp { Wire.Timestamp(seconds: Int64.random(in: 0...9, using: &rng), nanos: 0) }
    /// A reference into `zone`; nil = the default zone mostly, sometimes "Other" (for query
    /// values: a stored reference can only name its record's own zone).
    private mutating func referenceValue(inZone zone: String? = nil) -> Wire.Reference {
        let zone = zone ?? (chance(0.8) ? "_defaultZone" : "Other")
        return Wire.Reference(recordID: recordID(pick(Self.targets), zone: zone), action: .none)
    }
    /// Often near the antimeridian or a pole, where bounding boxes wrap.
    mutating func location() -> Wire.Location {
        switch Int.random(in: 0..<5, using: &rng) {
        case 0, 1:
            let longitude = Double.random(in: 170...180, using: &rng)
            return Wire.Location(latitude: Double.random(in: -10...10, using: &rng), longitude: chance(0.5) ? longitude : -longitude)
        case 2:
            return Wire.Location(latitude: Double.random(in: 80...90, using: &rng), longitude: Double.random(in: -180...180, using: &rng))
        default:
            return Wire.Location(latitude: Double.random(in: -60...60, using: &rng), longitude: Double.random(in: -180...180, using: &rng))
        }
    }
    private mutating func text() -> String {
        (0..<Int.random(in: 1...3, using: &rng)).map { _ in pick(Self.words) }.joined(separator: pick([" ", ", ", "-"]))
    }

    /// Fields of a record stored in `zone`.
    mutating func fields(zone: String = "_defaultZone") -> [Wire.RecordField] {
        var fields: [Wire.RecordField] = []
        func add(_ key: String, _ kind: Wire.FieldValue.Kind) { fields.append(field(key, kind)) }
        switch Int.random(in: 0..<6, using: &rng) {
        case 0: break
        case 1: add("a", .stringValue(pick(Self.strings)))
        case 2: add("a", .int64List(Wire.Int64List(values: (0..<Int.random(in: 0...3, using: &rng)).map { _ in Int64.random(in: -4...4, using: &rng) })))
        default: add("a", number())
        }
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: break
        case 1: add("s", .stringList(Wire.StringList(values: (0..<Int.random(in: 0...3, using: &rng)).map { _ in pick(Self.strings) })))
        default: add("s", .stringValue(pick(Self.strings)))
        }
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: break
        case 1: add("d", .dateList(Wire.TimestampList(values: (0..<Int.random(in: 0...3, using: &rng)).map { _ in date() })))
        default: add("d", .dateValue(date()))
        }
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: break
        case 1: add("r", .referenceList(Wire.ReferenceList(values: (0..<Int.random(in: 0...2, using: &rng)).map { _ in referenceValue(inZone: zone) })))
        default: add("r", .referenceValue(referenceValue(inZone: zone)))
        }
        if chance(0.5) { add("b", .bytesValue((0..<Int.random(in: 1...2, using: &rng)).map { _ in UInt8.random(in: 0...2, using: &rng) })) }
        if chance(0.2) { add("b", .bytesList(Wire.BytesList(values: [[UInt8.random(in: 0...2, using: &rng)]]))) }
        if chance(0.8) { add("k", number()) }
        if chance(0.7) { add("loc", .locationValue(location())) }
        if chance(0.2) { add("locs", .locationList(Wire.LocationList(values: [location()]))) }
        if chance(0.6) { add("t", .stringList(Wire.StringList(values: (0..<Int.random(in: 1...3, using: &rng)).map { _ in text() }))) }
        if chance(0.3) { add("title", .stringValue(text())) }
        // A later field of the same key replaces an earlier one; keep one per key.
        var seen = Set<String>()
        return fields.reversed().filter { seen.insert($0.key).inserted }.reversed()
    }

    // MARK: Predicates

    private mutating func scalar(_ family: String, key: String) -> Wire.FieldValue.Kind {
        if key == "recordID" { return .referenceValue(Wire.Reference(recordID: recordID("n\(Int.random(in: 0..<40, using: &rng))"))) }
        if key == "creationDate" { return .dateValue(Wire.Timestamp(seconds: 1_000 + Int64.random(in: 0...12, using: &rng), nanos: 0)) }
        switch family {
        case "number": return number()
        case "string": return .stringValue(pick(Self.strings))
        case "date": return .dateValue(date())
        case "reference": return .referenceValue(referenceValue())
        default: return .bytesValue((0..<Int.random(in: 1...2, using: &rng)).map { _ in UInt8.random(in: 0...2, using: &rng) })
        }
    }

    private mutating func comparison() -> Wire.QueryPredicate {
        let key = pick(["a", "a", "s", "d", "r", "b", "k", "creationDate", "recordID", "missing"])
        let family: String
        switch key {
        case "a": family = pick(["number", "string"])
        case "s": family = "string"
        case "d", "creationDate": family = "date"
        case "r", "recordID": family = "reference"
        case "b": family = "bytes"
        default: family = pick(["number", "string", "date"])
        }
        var ops: [Wire.ComparisonOperator] = [.equals, .notEquals, .in]
        if family != "reference" && family != "bytes" { ops += [.less, .lessOrEqual, .greater, .greaterOrEqual, .between] }
        if family == "string" { ops.append(.beginsWith) }
        if key != "creationDate" && key != "recordID" { ops.append(.contains) }
        let op = pick(ops)
        var values: [Wire.FieldValue.Kind]
        switch op {
        case .in: values = (0..<Int.random(in: 0...3, using: &rng)).map { _ in scalar(family, key: key) }
        case .between: values = [scalar(family, key: key), scalar(family, key: key)]
        default: return Q.cmp(key, op, scalar(family, key: key))
        }
        // The wire's lists are typed: keep one element type.
        let value: Wire.FieldValue.Kind
        switch family {
        case "number":
            let asInts = chance(0.5)
            values = values.map { if case .doubleValue(let d) = $0, asInts { .int64Value(Int64(d)) } else { $0 } }
            if asInts || values.allSatisfy({ if case .int64Value = $0 { true } else { false } }) {
                value = .int64List(Wire.Int64List(values: values.compactMap { if case .int64Value(let v) = $0 { v } else { nil } }))
            } else {
                value = .doubleList(Wire.DoubleList(values: values.map {
                    switch $0 {
                    case .int64Value(let v): Double(v)
                    case .doubleValue(let v): v
                    default: 0
                    }
                }))
            }
        case "string": value = .stringList(Wire.StringList(values: values.compactMap { if case .stringValue(let v) = $0 { v } else { nil } }))
        case "date": value = .dateList(Wire.TimestampList(values: values.compactMap { if case .dateValue(let v) = $0 { v } else { nil } }))
        case "reference":
            value = .referenceList(Wire.ReferenceList(values: values.compactMap { if case .referenceValue(let v) = $0 { v } else { nil } }))
        default: value = .bytesList(Wire.BytesList(values: values.compactMap { if case .bytesValue(let v) = $0 { v } else { nil } }))
        }
        return Q.cmp(key, op, value)
    }

    mutating func predicate(depth: Int) -> Wire.QueryPredicate {
        let leafOnly = depth >= 3
        switch Int.random(in: 0..<(leafOnly ? 10 : 14), using: &rng) {
        case 0: return chance(0.5) ? Q.all : Q.none
        case 1, 2: return Q.text((0..<Int.random(in: 1...2, using: &rng)).map { _ in pick(Self.words) }.joined(separator: " "))
        case 3:
            let center = location()
            return Q.near(
                "loc", center.latitude, center.longitude, within: chance(0.5) ? Double.random(in: 0...3_000_000, using: &rng) : Double.random(in: 0...300_000, using: &rng),
                pick([.less, .lessOrEqual, .greater, .greaterOrEqual]))
        case 4...9: return comparison()
        case 10, 11: return Q.and((0..<Int.random(in: 0...3, using: &rng)).map { _ in predicate(depth: depth + 1) })
        default: return Q.not(predicate(depth: depth + 1))
        }
    }

    mutating func sorts() -> [Wire.QuerySortDescriptor] {
        switch Int.random(in: 0..<5, using: &rng) {
        case 0: return []
        case 1: return [Q.sort("k", ascending: chance(0.5))]
        case 2: return [Q.sort("creationDate", ascending: chance(0.5)), Q.sort("k", ascending: chance(0.5))]
        case 3: return [Q.sort("loc", ascending: chance(0.5), from: location())]
        default: return [Q.sort("title", ascending: chance(0.5)), Q.sort("k")]
        }
    }

}

/// The store's answer to random queries (all pages) must equal a brute-force
/// filter and sort written here from the documented semantics, sharing no
/// code with the store's evaluator.
@Suite("Query randomized against brute force")
struct QueryRandomizedTests {
    @Test(arguments: [0xC1_2025, 7, 1_234_567] as [UInt64])
    func randomQueriesMatchABruteForceFilter(seed: UInt64) async throws {
        var generator = RandomQueries(seed: seed)
        try await withQueryStore(clock: SteppingClock(start: 1_000).clock) { storage, engine in
            try await storage.createZone("Other")
            var records: [String: Wire.Record] = [:]
            var order: [String] = []  // first-save order = the default query order
            for batch in 0..<4 {
                let fresh = (0..<10).map { i in
                    Wire.Record(recordID: recordID("n\(batch * 10 + i)"), recordType: "Note", fields: generator.fields())
                }
                for saved in try await storage.saveAll(fresh) {
                    records[saved.recordID?.recordName ?? ""] = saved
                    order.append(saved.recordID?.recordName ?? "")
                }
            }
            try await storage.saveAll([Wire.Record(recordID: recordID("other"), recordType: "Other", fields: generator.fields())])
            try await storage.saveAll([Wire.Record(recordID: recordID("elsewhere", zone: "Other"), recordType: "Note", fields: generator.fields(zone: "Other"))])

            var checked = 0
            var nonEmpty = 0
            for round in 0..<600 {
                if round == 300 {
                    // Change the data: new field values, deletions, re-creations.
                    var changes: [Wire.Record] = []
                    for name in order.shuffled(using: &generator.rng).prefix(15) {
                        guard var record = records[name] else { continue }
                        record.fields = generator.fields()
                        changes.append(record)
                    }
                    for saved in try await storage.modifyRecords(
                        RecordModification(saving: changes, savePolicy: .allKeys), in: alice, by: "_alice"
                    ).saves.compactMap(\.value) {
                        records[saved.recordID?.recordName ?? ""] = saved
                    }
                    let doomed = Array(order.shuffled(using: &generator.rng).prefix(8))
                    _ = try await storage.modifyRecords(RecordModification(deleting: doomed.map { recordID($0) }), in: alice, by: "_alice")
                    for name in doomed { records[name] = nil }
                    order.removeAll { doomed.contains($0) }
                    let reborn = doomed.prefix(3).map { Wire.Record(recordID: recordID($0), recordType: "Note", fields: generator.fields()) }
                    for saved in try await storage.saveAll(Array(reborn)) {
                        records[saved.recordID?.recordName ?? ""] = saved
                        order.append(saved.recordID?.recordName ?? "")
                    }
                }
                let predicate = generator.predicate(depth: 0)
                let sorts = generator.sorts()
                let limit = Int.random(in: 1...15, using: &generator.rng)
                let query = Q.query(predicate, sorts: sorts)
                let got: [String]
                do {
                    got = try await storage.queryAll(query, limit: limit).map { $0.recordID?.recordName ?? "?" }
                } catch let error as StoreError where !engine.runsTextSearchAndDistanceSorts {
                    // Refused by an engine that does not run them yet, saying so.
                    #expect(error.code == .invalidArguments && error.message.contains("does not"), "\(error)")
                    checked += 1
                    continue
                }
                let matching = order.filter { name in records[name].map { BruteForce.matches(predicate, $0) } ?? false }
                let expected = BruteForce.sorted(matching.compactMap { records[$0] }, by: sorts, defaultOrder: order)
                #expect(got == expected, "round \(round), limit \(limit): \(query)")
                if got != expected { break }
                checked += 1
                if !got.isEmpty { nonEmpty += 1 }
            }
            #expect(checked == 600)
            #expect(nonEmpty > 200, "the random predicates should often match something")
        }
    }
}

/// The semantics, spelled out again from the documentation, independently of the store.
private enum BruteForce {
    enum Value {
        case number(Double)
        case string([UInt8])
        case date(Int64)
        case bytes([UInt8])
        case reference(zone: String, name: String)
    }

    static func value(_ kind: Wire.FieldValue.Kind) -> Value? {
        switch kind {
        case .int64Value(let v): .number(Double(v))
        case .doubleValue(let v): .number(v)
        case .stringValue(let v): .string(Array(v.utf8))
        case .dateValue(let v): .date(v.seconds * 1_000_000_000 + Int64(v.nanos))
        case .bytesValue(let v): .bytes(v)
        case .referenceValue(let v): v.recordID.map { .reference(zone: $0.zoneID?.zoneName ?? "_defaultZone", name: $0.recordName) }
        default: nil
        }
    }

    static func elements(_ kind: Wire.FieldValue.Kind) -> [Value] {
        switch kind {
        case .int64List(let l): l.values.map { .number(Double($0)) }
        case .doubleList(let l): l.values.map { .number($0) }
        case .stringList(let l): l.values.map { .string(Array($0.utf8)) }
        case .dateList(let l): l.values.map { .date($0.seconds * 1_000_000_000 + Int64($0.nanos)) }
        case .bytesList(let l): l.values.map { .bytes($0) }
        case .referenceList(let l): l.values.compactMap { r in r.recordID.map { .reference(zone: $0.zoneID?.zoneName ?? "_defaultZone", name: $0.recordName) } }
        default: []
        }
    }

    /// -1, 0, 1, or nil when the two do not compare.
    static func compare(_ a: Value, _ b: Value) -> Int? {
        switch (a, b) {
        case (.number(let x), .number(let y)): return x < y ? -1 : (x > y ? 1 : 0)
        case (.string(let x), .string(let y)):
            for (p, q) in zip(x, y) where p != q { return p < q ? -1 : 1 }
            return x.count < y.count ? -1 : (x.count > y.count ? 1 : 0)
        case (.date(let x), .date(let y)): return x < y ? -1 : (x > y ? 1 : 0)
        case (.bytes(let x), .bytes(let y)): return x == y ? 0 : 1
        case (.reference(let z1, let n1), .reference(let z2, let n2)): return z1 == z2 && n1 == n2 ? 0 : 1
        default: return nil
        }
    }

    static func stored(_ key: String, _ record: Wire.Record) -> Wire.FieldValue.Kind? {
        switch key {
        case "creationDate": return record.creationDate.map { .dateValue($0) }
        case "recordID": return record.recordID.map { .referenceValue(Wire.Reference(recordID: $0)) }
        default: return record.fields.first { $0.key == key }?.value?.kind
        }
    }

    static func matches(_ predicate: Wire.QueryPredicate, _ record: Wire.Record) -> Bool {
        switch predicate.node {
        case .truePredicate, nil: return true
        case .falsePredicate: return false
        case .andPredicate(let and): return and.operands.allSatisfy { matches($0, record) }
        case .notPredicate(let not): return !(not.operand.map { matches($0, record) } ?? true)
        case .textSearch(let search):
            var words = Set<String>()
            for field in record.fields {
                switch field.value?.kind {
                case .stringValue(let s): words.formUnion(tokens(s))
                case .stringList(let l): for s in l.values { words.formUnion(tokens(s)) }
                default: break
                }
            }
            return tokens(search.text).allSatisfy(words.contains)
        case .distance(let distance):
            guard case .locationValue(let at)? = stored(distance.key, record), let from = distance.fromLocation else { return false }
            let meters = haversine(at.latitude, at.longitude, from.latitude, from.longitude)
            switch distance.comparisonOperator {
            case .lessOrEqual: return meters <= distance.radiusMeters
            case .greater: return meters > distance.radiusMeters
            case .greaterOrEqual: return meters >= distance.radiusMeters
            default: return meters < distance.radiusMeters
            }
        case .comparison(let comparison):
            guard let kind = stored(comparison.key, record), let operand = comparison.value?.kind else { return false }
            if comparison.comparisonOperator == .contains {
                guard let wanted = value(operand) else { return false }
                return elements(kind).contains { compare($0, wanted) == 0 }
            }
            guard let mine = value(kind) else { return false }
            func cmp(_ other: Value) -> Int? { compare(mine, other) }
            switch comparison.comparisonOperator {
            case .equals: return value(operand).flatMap(cmp) == 0
            case .notEquals: return value(operand).flatMap(cmp).map { $0 != 0 } ?? false
            case .less: return value(operand).flatMap(cmp) == -1
            case .lessOrEqual: return [-1, 0].contains(value(operand).flatMap(cmp))
            case .greater: return value(operand).flatMap(cmp) == 1
            case .greaterOrEqual: return [1, 0].contains(value(operand).flatMap(cmp))
            case .in: return elements(operand).contains { cmp($0) == 0 }
            case .between:
                let bounds = elements(operand)
                guard bounds.count == 2, let low = cmp(bounds[0]), let high = cmp(bounds[1]) else { return false }
                return low >= 0 && high <= 0
            case .beginsWith:
                guard case .string(let s) = mine, case .string(let p)? = value(operand) else { return false }
                return s.starts(with: p)
            default: return false
            }
        }
    }

    static func tokens(_ text: String) -> [String] {
        text.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
            .components(separatedBy: CharacterSet.alphanumerics.inverted).filter { !$0.isEmpty }
    }

    static func haversine(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        let radians = Double.pi / 180
        let dLat = (lat2 - lat1) * radians
        let dLon = (lon2 - lon1) * radians
        let h = pow(sin(dLat / 2), 2) + cos(lat1 * radians) * cos(lat2 * radians) * pow(sin(dLon / 2), 2)
        return 2 * 6_371_008.8 * asin(min(1, h.squareRoot()))
    }

    /// Sort keys of one record: nil = missing (after every present value).
    static func sorted(_ records: [Wire.Record], by sorts: [Wire.QuerySortDescriptor], defaultOrder: [String]) -> [String] {
        let name = { (r: Wire.Record) in r.recordID?.recordName ?? "" }
        guard !sorts.isEmpty else { return records.map(name) }
        func key(_ r: Wire.Record, _ sort: Wire.QuerySortDescriptor) -> Value? {
            if let from = sort.relativeLocation {
                guard case .locationValue(let at)? = stored(sort.key, r) else { return nil }
                return .number(haversine(at.latitude, at.longitude, from.latitude, from.longitude))
            }
            guard let kind = stored(sort.key, r) else { return nil }
            return value(kind)
        }
        return records.sorted { a, b in
            for sort in sorts {
                switch (key(a, sort), key(b, sort)) {
                case (nil, nil): continue
                case (nil, _): return false
                case (_, nil): return true
                case (let x?, let y?):
                    let c = compare(x, y) ?? 0
                    if c != 0 { return sort.ascending ? c < 0 : c > 0 }
                }
            }
            return Array(name(a).utf8).lexicographicallyPrecedes(Array(name(b).utf8))
        }.map(name)
    }
}
