import CirrusWire

/// Random values for a record's own parts, the kinds that try a hand-written encoder against
/// protobuf-c's: IDs with and without zones, empty and long (two-byte length) strings, other
/// scripts, and absent, zero, negative and extreme dates.
struct RandomRecordParts {
    private var generator = SystemRandomNumberGenerator()

    private static let names = [
        "", "a", "note-0001", "__defaultOwner__", "Ünïcødé ✈︎ 記録", String(repeating: "x", count: 130), String(repeating: "é", count: 200),
    ]
    private static let dates: [Wire.Timestamp?] = [
        nil, Wire.Timestamp(), Wire.Timestamp(seconds: 1_700_000_000, nanos: 999_999_999),
        Wire.Timestamp(seconds: -1, nanos: -5), Wire.Timestamp(seconds: .min, nanos: .max),
        Wire.Timestamp(seconds: .max, nanos: .min), Wire.Timestamp(seconds: 0, nanos: 1),
    ]

    mutating func name() -> String { Self.names.randomElement(using: &generator) ?? "" }

    mutating func date() -> Wire.Timestamp? { Self.dates.randomElement(using: &generator) ?? nil }

    mutating func bool() -> Bool { Bool.random(using: &generator) }

    /// No ID, an ID without a zone, with an empty zone, or with a zone and its owner.
    mutating func id() -> Wire.RecordID? {
        switch Int.random(in: 0..<4, using: &generator) {
        case 0: return nil
        case 1: return Wire.RecordID(recordName: name())
        case 2: return Wire.RecordID(recordName: name(), zoneID: Wire.RecordZoneID())
        default: return Wire.RecordID(recordName: name(), zoneID: Wire.RecordZoneID(zoneName: name(), ownerName: name()))
        }
    }

    /// A record of random own parts (ID, type, change tag, dates, creator, last modifier).
    mutating func record() -> Wire.Record {
        Wire.Record(
            recordID: id(), recordType: name(), recordChangeTag: name(), creationDate: date(),
            modificationDate: date(), creatorUserRecordID: id(), lastModifiedUserRecordID: id())
    }
}
