import CirrusWire
import Foundation
import GRDB

/// What a `record_values` row holds (column `kind`, schema v2; v7 since): the value's
/// type, list elements apart from single values, so a string never matches a
/// reference, `==` never matches a list element and a sort can tell what a
/// field holds without loading records.
package enum IndexedKind: Int64, Sendable, CaseIterable {
    case string = 1, int64 = 2, double = 3, bytes = 4, date = 5, reference = 6, location = 7, asset = 8
    case stringList = 17, int64List = 18, doubleList = 19, bytesList = 20
    case dateList = 21, referenceList = 22, locationList = 23, assetList = 24

    /// The kind of an element of a list of this kind's values.
    package var asList: IndexedKind { IndexedKind(rawValue: rawValue | 16) ?? self }

    package var isList: Bool { rawValue & 16 != 0 }

    /// The kinds a sort can order by: single strings, numbers and dates.
    package static let sortable: [IndexedKind] = [.string, .int64, .double, .date]

    /// The kind of a wire value.
    package init(_ kind: Wire.FieldValue.Kind) {
        switch kind {
        case .stringValue: self = .string
        case .int64Value: self = .int64
        case .doubleValue: self = .double
        case .bytesValue: self = .bytes
        case .dateValue: self = .date
        case .referenceValue: self = .reference
        case .locationValue: self = .location
        case .assetValue: self = .asset
        case .stringList: self = .stringList
        case .int64List: self = .int64List
        case .doubleList: self = .doubleList
        case .bytesList: self = .bytesList
        case .dateList: self = .dateList
        case .referenceList: self = .referenceList
        case .locationList: self = .locationList
        case .assetList: self = .assetList
        }
    }

    /// How a message names the kind ("string", "int64 list" …).
    package var name: String {
        switch self {
        case .string: "string"
        case .int64: "int64"
        case .double: "double"
        case .bytes: "bytes"
        case .date: "date"
        case .reference: "reference"
        case .location: "location"
        case .asset: "asset"
        case .stringList: "string list"
        case .int64List: "int64 list"
        case .doubleList: "double list"
        case .bytesList: "bytes list"
        case .dateList: "date list"
        case .referenceList: "reference list"
        case .locationList: "location list"
        case .assetList: "asset list"
        }
    }
}

/// One row of `record_values`: a field value (or list element) as a query
/// compares it, in the field of its type. Assets and empty lists get one row without
/// a value, so what a field holds is known from the index alone. Every engine indexes a
/// record with these rows (``RecordCodec/indexRows(of:)``), each in its own table.
package struct FieldIndexRow: Sendable {
    package var key: String
    package var listIndex: Int
    package var kind: IndexedKind
    package var int: Int64? = nil
    package var real: Double? = nil
    package var real2: Double? = nil
    package var text: String? = nil
    package var blob: Data? = nil

    /// What `record_values.value` holds for this row (schema v7): the one
    /// value column that is set, NULL for assets and empty lists.
    var value: DatabaseValue {
        if let int { return int.databaseValue }
        if let real { return real.databaseValue }
        if let text { return text.databaseValue }
        if let blob { return blob.databaseValue }
        return .null
    }
}

extension RecordCodec {
    /// The `record_values` rows of a record. Encrypted fields are not
    /// queryable in CloudKit and get no rows.
    package static func indexRows(of record: Wire.Record) -> [FieldIndexRow] {
        var rows: [FieldIndexRow] = []
        for field in record.fields where !field.isEncrypted {
            guard let kind = field.value?.kind else { continue }
            let key = field.key
            func list<T>(_ values: [T], _ kind: IndexedKind, _ make: (inout FieldIndexRow, T) -> Void) {
                guard !values.isEmpty else {
                    rows.append(FieldIndexRow(key: key, listIndex: -1, kind: kind))
                    return
                }
                for (i, value) in values.enumerated() {
                    var row = FieldIndexRow(key: key, listIndex: i, kind: kind)
                    make(&row, value)
                    rows.append(row)
                }
            }
            switch kind {
            case .stringValue(let value): rows.append(FieldIndexRow(key: key, listIndex: -1, kind: .string, text: value))
            case .int64Value(let value): rows.append(FieldIndexRow(key: key, listIndex: -1, kind: .int64, int: value))
            case .doubleValue(let value): rows.append(FieldIndexRow(key: key, listIndex: -1, kind: .double, real: value))
            case .bytesValue(let value):
                rows.append(FieldIndexRow(key: key, listIndex: -1, kind: .bytes, blob: Data(value)))
            case .dateValue(let value):
                rows.append(FieldIndexRow(key: key, listIndex: -1, kind: .date, int: nanoseconds(value)))
            case .referenceValue(let value): rows.append(row(key, -1, value))
            case .locationValue(let value): rows.append(row(key, -1, value))
            case .assetValue: rows.append(FieldIndexRow(key: key, listIndex: -1, kind: .asset))
            case .assetList: rows.append(FieldIndexRow(key: key, listIndex: -1, kind: .assetList))
            case .stringList(let values): list(values.values, .stringList) { $0.text = $1 }
            case .int64List(let values): list(values.values, .int64List) { $0.int = $1 }
            case .doubleList(let values): list(values.values, .doubleList) { $0.real = $1 }
            case .bytesList(let values): list(values.values, .bytesList) { $0.blob = Data($1) }
            case .dateList(let values): list(values.values, .dateList) { $0.int = nanoseconds($1) }
            case .referenceList(let values):
                list(values.values, .referenceList) { $0.text = $1.recordID?.recordName ?? "" }
            case .locationList(let values):
                list(values.values, .locationList) { row, location in
                    row.real = location.latitude
                    row.real2 = location.longitude
                }
            }
        }
        return rows
    }

    private static func row(_ key: String, _ index: Int, _ reference: Wire.Reference) -> FieldIndexRow {
        FieldIndexRow(key: key, listIndex: index, kind: .reference, text: reference.recordID?.recordName ?? "")
    }

    private static func row(_ key: String, _ index: Int, _ location: Wire.Location) -> FieldIndexRow {
        FieldIndexRow(key: key, listIndex: index, kind: .location, real: location.latitude, real2: location.longitude)
    }

    /// The text full-text search (`self CONTAINS 'words'`) looks in: every
    /// string and string-list element of the record's unencrypted fields, one
    /// per line; nil when there is none.
    static func searchableText(of record: Wire.Record) -> String? {
        var parts: [String] = []
        for field in record.fields where !field.isEncrypted {
            switch field.value?.kind {
            case .stringValue(let value): parts.append(value)
            case .stringList(let list): parts.append(contentsOf: list.values)
            default: continue
            }
        }
        let text = parts.filter { !$0.isEmpty }.joined(separator: "\n")
        return text.isEmpty ? nil : text
    }

    /// Nanoseconds since the Unix epoch, clamped to the Int64 range (± 292 years).
    package static func nanoseconds(_ timestamp: Wire.Timestamp) -> Int64 {
        let (scaled, overflow) = timestamp.seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return timestamp.seconds < 0 ? Int64.min : Int64.max }
        let (sum, overflow2) = scaled.addingReportingOverflow(Int64(timestamp.nanos))
        if overflow2 { return Int64.max }
        return sum
    }

    /// Seconds since the epoch as a Double, for tombstone ages.
    package static func seconds(_ timestamp: Wire.Timestamp) -> Double {
        Double(timestamp.seconds) + Double(timestamp.nanos) / 1_000_000_000
    }
}
