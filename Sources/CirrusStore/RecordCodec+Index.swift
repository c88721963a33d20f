import CirrusWire
import Foundation

/// One row of `record_fields`: a field value (or list element) in the typed
/// column a query compares it in.
struct FieldIndexRow: Sendable {
    var key: String
    var listIndex: Int
    var int: Int64? = nil
    var real: Double? = nil
    var real2: Double? = nil
    var text: String? = nil
    var blob: Data? = nil
}

extension RecordCodec {
    /// The `record_fields` rows of a record. Encrypted fields and assets are
    /// not queryable in CloudKit and get no rows.
    static func indexRows(of record: Wire.Record) -> [FieldIndexRow] {
        var rows: [FieldIndexRow] = []
        for field in record.fields where !field.isEncrypted {
            guard let kind = field.value?.kind else { continue }
            let key = field.key
            switch kind {
            case .stringValue(let value): rows.append(FieldIndexRow(key: key, listIndex: -1, text: value))
            case .int64Value(let value): rows.append(FieldIndexRow(key: key, listIndex: -1, int: value))
            case .doubleValue(let value): rows.append(FieldIndexRow(key: key, listIndex: -1, real: value))
            case .bytesValue(let value): rows.append(FieldIndexRow(key: key, listIndex: -1, blob: Data(value)))
            case .dateValue(let value): rows.append(FieldIndexRow(key: key, listIndex: -1, int: nanoseconds(value)))
            case .referenceValue(let value): rows.append(row(key, -1, value))
            case .locationValue(let value): rows.append(row(key, -1, value))
            case .assetValue, .assetList: continue
            case .stringList(let list):
                for (i, value) in list.values.enumerated() { rows.append(FieldIndexRow(key: key, listIndex: i, text: value)) }
            case .int64List(let list):
                for (i, value) in list.values.enumerated() { rows.append(FieldIndexRow(key: key, listIndex: i, int: value)) }
            case .doubleList(let list):
                for (i, value) in list.values.enumerated() { rows.append(FieldIndexRow(key: key, listIndex: i, real: value)) }
            case .bytesList(let list):
                for (i, value) in list.values.enumerated() {
                    rows.append(FieldIndexRow(key: key, listIndex: i, blob: Data(value)))
                }
            case .dateList(let list):
                for (i, value) in list.values.enumerated() {
                    rows.append(FieldIndexRow(key: key, listIndex: i, int: nanoseconds(value)))
                }
            case .referenceList(let list):
                for (i, value) in list.values.enumerated() { rows.append(row(key, i, value)) }
            case .locationList(let list):
                for (i, value) in list.values.enumerated() { rows.append(row(key, i, value)) }
            }
        }
        return rows
    }

    private static func row(_ key: String, _ index: Int, _ reference: Wire.Reference) -> FieldIndexRow {
        FieldIndexRow(key: key, listIndex: index, text: reference.recordID?.recordName ?? "")
    }

    private static func row(_ key: String, _ index: Int, _ location: Wire.Location) -> FieldIndexRow {
        FieldIndexRow(key: key, listIndex: index, real: location.latitude, real2: location.longitude)
    }

    /// Nanoseconds since the Unix epoch, clamped to the Int64 range (± 292 years).
    static func nanoseconds(_ timestamp: Wire.Timestamp) -> Int64 {
        let (scaled, overflow) = timestamp.seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return timestamp.seconds < 0 ? Int64.min : Int64.max }
        let (sum, overflow2) = scaled.addingReportingOverflow(Int64(timestamp.nanos))
        if overflow2 { return Int64.max }
        return sum
    }

    /// Seconds since the epoch as a Double, for tombstone ages.
    static func seconds(_ timestamp: Wire.Timestamp) -> Double {
        Double(timestamp.seconds) + Double(timestamp.nanos) / 1_000_000_000
    }
}
