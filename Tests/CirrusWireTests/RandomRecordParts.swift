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

    // MARK: Fields

    private static let int64s: [Int64] = [0, 1, -1, 127, 128, 16_384, .max, .min, 1_700_000_000_123]
    private static let doubles: [Double] = [0, -0.0, 1.5, -2.25e300, .infinity, -.infinity, .nan, .leastNonzeroMagnitude]
    private static let actions: [Wire.ReferenceAction] = [.unspecified, .none, .deleteSelf, .unrecognized(7), .unrecognized(-3)]

    /// Bytes of a random length: empty, short, past the one-byte length (128) and the two-byte
    /// one (16,384).
    mutating func bytes() -> [UInt8] {
        let count = [0, 1, 40, 127, 128, 300, 16_384, 20_000].randomElement(using: &generator) ?? 0
        let seed = UInt8.random(in: 0...255, using: &generator)
        return (0..<count).map { seed &+ UInt8(truncatingIfNeeded: $0 &* 31) }
    }

    mutating func int64() -> Int64 { Self.int64s.randomElement(using: &generator) ?? 0 }

    mutating func double() -> Double { Self.doubles.randomElement(using: &generator) ?? 0 }

    mutating func timestamp() -> Wire.Timestamp { date() ?? Wire.Timestamp() }

    mutating func reference() -> Wire.Reference {
        Wire.Reference(recordID: id(), action: Self.actions.randomElement(using: &generator) ?? .none)
    }

    /// A list of 0 to 3 elements (or, now and then, 40: a list past a one-byte length).
    mutating func list<Element>(_ element: (inout Self) -> Element) -> [Element] {
        let count = Int.random(in: 0..<10, using: &generator) == 0 ? 40 : Int.random(in: 0...3, using: &generator)
        return (0..<count).map { _ in element(&self) }
    }

    /// A value of every kind there is, with its defaults and extremes, or no kind at all.
    mutating func value() -> Wire.FieldValue {
        switch Int.random(in: 0..<17, using: &generator) {
        case 0: return Wire.FieldValue()
        case 1: return Wire.FieldValue(kind: .stringValue(name()))
        case 2: return Wire.FieldValue(kind: .int64Value(int64()))
        case 3: return Wire.FieldValue(kind: .doubleValue(double()))
        case 4: return Wire.FieldValue(kind: .bytesValue(bytes()))
        case 5: return Wire.FieldValue(kind: .dateValue(timestamp()))
        case 6: return Wire.FieldValue(kind: .referenceValue(reference()))
        case 7: return Wire.FieldValue(kind: .locationValue(Wire.Location(latitude: double(), longitude: double())))
        case 8: return Wire.FieldValue(kind: .assetValue(Wire.Asset(sha256: bytes(), size: 3, fileName: name())))
        case 9: return Wire.FieldValue(kind: .stringList(Wire.StringList(values: list { $0.name() })))
        case 10: return Wire.FieldValue(kind: .int64List(Wire.Int64List(values: list { $0.int64() })))
        case 11: return Wire.FieldValue(kind: .doubleList(Wire.DoubleList(values: list { $0.double() })))
        case 12: return Wire.FieldValue(kind: .bytesList(Wire.BytesList(values: list { $0.bytes() })))
        case 13: return Wire.FieldValue(kind: .dateList(Wire.TimestampList(values: list { $0.timestamp() })))
        case 14: return Wire.FieldValue(kind: .referenceList(Wire.ReferenceList(values: list { $0.reference() })))
        case 15: return Wire.FieldValue(kind: .locationList(Wire.LocationList(values: [Wire.Location(altitude: double())])))
        default: return Wire.FieldValue(kind: .assetList(Wire.AssetList(values: [Wire.Asset(size: 1)])))
        }
    }

    /// A field with a random key (empty now and then), value (absent now and then) and
    /// encryption flag.
    mutating func field() -> Wire.RecordField {
        Wire.RecordField(
            key: name(), value: Int.random(in: 0..<8, using: &generator) == 0 ? nil : value(), isEncrypted: bool())
    }

    /// 0 to 5 random fields.
    mutating func fields() -> [Wire.RecordField] {
        (0..<Int.random(in: 0...5, using: &generator)).map { _ in field() }
    }
}
