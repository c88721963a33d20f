import Foundation

/// A type whose values a record field can hold (CloudKit's `CKRecordValueProtocol`).
///
/// Conforming types: `String`, `Int`, `Int8`, `Int16`, `Int32`, `Int64`, `UInt8`,
/// `UInt16`, `UInt32`, `Double`, `Float`, `Bool`, `NSNumber`, `Date`, `Data`,
/// `CKRecord.Reference`, `CKAsset`, `CKLocation`, and arrays of any of these (lists
/// never nest). Other types cannot conform: the requirement's type has no public
/// initialiser.
///
/// Numbers are stored as CloudKit stores them: integers and `Bool` as a 64-bit integer,
/// `Float` and `Double` as a double. Reading a number back gives an `NSNumber`, so
/// `record["count"] as? Int`, `as? Int64`, `as? Double` and `as? Bool` (for 0 and 1)
/// all work, before and after a round trip through the server.
public protocol CKRecordValueProtocol: Sendable {
    /// The value as a record stores it. Cirrus-internal; do not use.
    var _cirrusFieldValue: _CirrusFieldValue { get }
}

/// CloudKit's name for the type of a record field's value.
public typealias CKRecordValue = CKRecordValueProtocol

/// A type whose arrays are record values (a list of it). Cirrus-internal marker that
/// keeps lists from nesting.
public protocol _CirrusListElement: CKRecordValueProtocol {
    /// The list of these values as a record stores it. Cirrus-internal; do not use.
    static func _cirrusList(_ values: [Self]) -> _CirrusFieldValue
}

/// A record field's value as CirrusModel stores it. Cirrus-internal.
public struct _CirrusFieldValue: Sendable {
    let storage: FieldValue
    init(_ storage: FieldValue) { self.storage = storage }
}

/// The stored form of a field value: one case per wire kind.
enum FieldValue: Hashable, Sendable {
    case string(String)
    case int64(Int64)
    case double(Double)
    case bytes(Data)
    case date(Date)
    case reference(CKRecord.Reference)
    case location(CKLocation)
    case asset(CKAsset)
    case stringList([String])
    case int64List([Int64])
    case doubleList([Double])
    case bytesList([Data])
    case dateList([Date])
    case referenceList([CKRecord.Reference])
    case locationList([CKLocation])
    case assetList([CKAsset])

    /// The value as callers read it: numbers as `NSNumber` (so `as? Int`, `as? Bool` … work).
    var recordValue: any CKRecordValueProtocol {
        switch self {
        case .string(let v): v
        case .int64(let v): NSNumber(value: v)
        case .double(let v): NSNumber(value: v)
        case .bytes(let v): v
        case .date(let v): v
        case .reference(let v): v
        case .location(let v): v
        case .asset(let v): v
        case .stringList(let v): v
        case .int64List(let v): v.map { NSNumber(value: $0) }
        case .doubleList(let v): v.map { NSNumber(value: $0) }
        case .bytesList(let v): v
        case .dateList(let v): v
        case .referenceList(let v): v
        case .locationList(let v): v
        case .assetList(let v): v
        }
    }
}

// MARK: - Scalars

extension String: _CirrusListElement {
    public var _cirrusFieldValue: _CirrusFieldValue { _CirrusFieldValue(.string(self)) }
    public static func _cirrusList(_ values: [String]) -> _CirrusFieldValue { _CirrusFieldValue(.stringList(values)) }
}

extension Data: _CirrusListElement {
    public var _cirrusFieldValue: _CirrusFieldValue { _CirrusFieldValue(.bytes(self)) }
    public static func _cirrusList(_ values: [Data]) -> _CirrusFieldValue { _CirrusFieldValue(.bytesList(values)) }
}

extension Date: _CirrusListElement {
    public var _cirrusFieldValue: _CirrusFieldValue { _CirrusFieldValue(.date(self)) }
    public static func _cirrusList(_ values: [Date]) -> _CirrusFieldValue { _CirrusFieldValue(.dateList(values)) }
}

extension CKRecord.Reference: _CirrusListElement {
    public var _cirrusFieldValue: _CirrusFieldValue { _CirrusFieldValue(.reference(self)) }
    public static func _cirrusList(_ values: [CKRecord.Reference]) -> _CirrusFieldValue {
        _CirrusFieldValue(.referenceList(values))
    }
}

extension CKLocation: _CirrusListElement {
    public var _cirrusFieldValue: _CirrusFieldValue { _CirrusFieldValue(.location(self)) }
    public static func _cirrusList(_ values: [CKLocation]) -> _CirrusFieldValue { _CirrusFieldValue(.locationList(values)) }
}

extension CKAsset: _CirrusListElement {
    public var _cirrusFieldValue: _CirrusFieldValue { _CirrusFieldValue(.asset(self)) }
    public static func _cirrusList(_ values: [CKAsset]) -> _CirrusFieldValue { _CirrusFieldValue(.assetList(values)) }
}

// MARK: - Numbers

/// Integer types stored as int64 (every value fits).
protocol CirrusInt64Storable: _CirrusListElement {
    var cirrusInt64: Int64 { get }
}

extension CirrusInt64Storable {
    public var _cirrusFieldValue: _CirrusFieldValue { _CirrusFieldValue(.int64(cirrusInt64)) }
    public static func _cirrusList(_ values: [Self]) -> _CirrusFieldValue {
        _CirrusFieldValue(.int64List(values.map(\.cirrusInt64)))
    }
}

extension Int: CirrusInt64Storable { var cirrusInt64: Int64 { Int64(self) } }
extension Int64: CirrusInt64Storable { var cirrusInt64: Int64 { self } }
extension Int32: CirrusInt64Storable { var cirrusInt64: Int64 { Int64(self) } }
extension Int16: CirrusInt64Storable { var cirrusInt64: Int64 { Int64(self) } }
extension Int8: CirrusInt64Storable { var cirrusInt64: Int64 { Int64(self) } }
extension UInt32: CirrusInt64Storable { var cirrusInt64: Int64 { Int64(self) } }
extension UInt16: CirrusInt64Storable { var cirrusInt64: Int64 { Int64(self) } }
extension UInt8: CirrusInt64Storable { var cirrusInt64: Int64 { Int64(self) } }
/// `true` is stored as 1 and `false` as 0, as CloudKit does.
extension Bool: CirrusInt64Storable { var cirrusInt64: Int64 { self ? 1 : 0 } }

extension Double: _CirrusListElement {
    public var _cirrusFieldValue: _CirrusFieldValue { _CirrusFieldValue(.double(self)) }
    public static func _cirrusList(_ values: [Double]) -> _CirrusFieldValue { _CirrusFieldValue(.doubleList(values)) }
}

extension Float: _CirrusListElement {
    public var _cirrusFieldValue: _CirrusFieldValue { _CirrusFieldValue(.double(Double(self))) }
    public static func _cirrusList(_ values: [Float]) -> _CirrusFieldValue {
        _CirrusFieldValue(.doubleList(values.map { Double($0) }))
    }
}

/// An `NSNumber` holding a float or double is stored as a double, any other as int64
/// (an unsigned value above `Int64.max` as a double).
extension NSNumber: _CirrusListElement {
    public var _cirrusFieldValue: _CirrusFieldValue { _CirrusFieldValue(cirrusScalar) }

    public static func _cirrusList(_ values: [NSNumber]) -> _CirrusFieldValue {
        let scalars = values.map(\.cirrusScalar)
        var ints: [Int64] = []
        for scalar in scalars {
            guard case .int64(let value) = scalar else {
                return _CirrusFieldValue(.doubleList(values.map(\.doubleValue)))
            }
            ints.append(value)
        }
        return _CirrusFieldValue(.int64List(ints))
    }

    var cirrusScalar: FieldValue {
        let type = String(cString: objCType)
        if type == "d" || type == "f" { return .double(doubleValue) }
        if type == "Q" || type == "L", uint64Value > UInt64(Int64.max) { return .double(doubleValue) }
        return .int64(int64Value)
    }
}

// MARK: - Lists

extension Array: CKRecordValueProtocol where Element: _CirrusListElement {
    public var _cirrusFieldValue: _CirrusFieldValue { Element._cirrusList(self) }
}
