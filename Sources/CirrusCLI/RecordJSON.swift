import CirrusKit
import CirrusModel
import Foundation

/// Records as JSON Lines, the format `cirrus export`, `records get|query` and `changes` write
/// and `cirrus import` reads back: one object per record, `$recordName` and `$recordType`
/// first, then the fields by name. Strings, integers, doubles (always written with a fraction)
/// and lists are plain JSON; other types are tagged: `{"$date": "2024-05-01T10:00:00.000Z"}`,
/// `{"$bytes": "base64"}`, `{"$location": {"latitude": …, "longitude": …}}`,
/// `{"$reference": "name", "action": "deleteSelf"}`, `{"$asset": "path"}`.
package enum RecordJSON {
    /// The JSON object of `record`; with `system` also its zone, change tag and dates.
    package static func object(_ record: CKRecord, converter: FieldConverter, system: Bool = false) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("$recordName", .string(record.recordID.recordName)),
            ("$recordType", .string(record.recordType)),
        ]
        if system {
            members.append(("$zone", .string(record.recordID.zoneID.zoneName)))
            if let tag = record.recordChangeTag { members.append(("$changeTag", .string(tag))) }
            if let date = record.creationDate { members.append(("$created", .string(converter.text(of: date)))) }
            if let date = record.modificationDate { members.append(("$modified", .string(converter.text(of: date)))) }
        }
        for key in record.allKeys().sorted() {
            guard let value = record[key] else { continue }
            members.append((key, self.value(value, converter: converter)))
        }
        return .object(members)
    }

    /// One field value as JSON.
    static func value(_ value: any CKRecordValue, converter: FieldConverter) -> JSONValue {
        switch value {
        case let text as String: return .string(text)
        case let number as NSNumber: return self.number(number)
        case let date as Date: return .object([("$date", .string(converter.text(of: date)))])
        case let data as Data: return .object([("$bytes", .string(data.base64EncodedString()))])
        case let location as CKLocation:
            return .object([("$location", .object([("latitude", .double(location.latitude)), ("longitude", .double(location.longitude))]))])
        case let reference as CKRecord.Reference: return self.reference(reference)
        case let asset as CKAsset: return .object([("$asset", asset.fileURL.map { .string($0.path) } ?? .null)])
        case let list as [String]: return .array(list.map { .string($0) })
        case let list as [NSNumber]: return .array(list.map(self.number))
        case let list as [Date]: return .array(list.map { .object([("$date", .string(converter.text(of: $0)))]) })
        case let list as [Data]: return .array(list.map { .object([("$bytes", .string($0.base64EncodedString()))]) })
        case let list as [CKLocation]:
            return .array(list.map { .object([("$location", .object([("latitude", .double($0.latitude)), ("longitude", .double($0.longitude))]))]) })
        case let list as [CKRecord.Reference]: return .array(list.map(self.reference))
        case let list as [CKAsset]: return .array(list.map { .object([("$asset", $0.fileURL.map { .string($0.path) } ?? .null)]) })
        default: return .string("\(value)")
        }
    }

    private static func number(_ number: NSNumber) -> JSONValue {
        let type = String(cString: number.objCType)
        if type == "d" || type == "f" { return .double(number.doubleValue) }
        return .integer(number.int64Value)
    }

    private static func reference(_ reference: CKRecord.Reference) -> JSONValue {
        var members: [(String, JSONValue)] = [("$reference", .string(reference.recordID.recordName))]
        if reference.action == .deleteSelf { members.append(("action", .string("deleteSelf"))) }
        return .object(members)
    }
}
