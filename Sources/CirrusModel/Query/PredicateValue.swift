import CirrusWire
import Foundation

/// The value side of a comparison: one scalar, or a list of scalars of one type (from an
/// `{a, b}` aggregate or an array argument).
enum PredicateValue {
    case scalar(FieldValue)
    case list([FieldValue])

    /// "a string", "a list" … for error messages.
    var kindDescription: String {
        switch self {
        case .scalar(let value): value.kindDescription
        case .list: "a list"
        }
    }

    /// The elements as one typed wire list; nil for an empty list.
    static func wireList(_ elements: [FieldValue]) -> FieldValue? {
        guard let first = elements.first else { return nil }
        func all<T>(_ extract: (FieldValue) -> T?) -> [T] { elements.compactMap(extract) }
        switch first {
        case .string: return .stringList(all { if case .string(let v) = $0 { v } else { nil } })
        case .int64: return .int64List(all { if case .int64(let v) = $0 { v } else { nil } })
        case .double: return .doubleList(all { if case .double(let v) = $0 { v } else { nil } })
        case .bytes: return .bytesList(all { if case .bytes(let v) = $0 { v } else { nil } })
        case .date: return .dateList(all { if case .date(let v) = $0 { v } else { nil } })
        case .reference: return .referenceList(all { if case .reference(let v) = $0 { v } else { nil } })
        case .location: return .locationList(all { if case .location(let v) = $0 { v } else { nil } })
        default: return nil
        }
    }
}

extension FieldValue {
    /// "a string", "an integer" … for error messages.
    var kindDescription: String {
        switch self {
        case .string: "a string"
        case .int64: "an integer"
        case .double: "a floating-point number"
        case .bytes: "bytes"
        case .date: "a date"
        case .reference: "a reference"
        case .location: "a location"
        case .asset: "an asset"
        case .stringList, .int64List, .doubleList, .bytesList, .dateList, .referenceList, .locationList, .assetList:
            "a list"
        }
    }

    /// Strings, numbers and dates: the kinds `<`, `BETWEEN` and sorting can order.
    var isOrderable: Bool {
        switch self {
        case .string, .int64, .double, .date: true
        default: false
        }
    }
}

/// Why an argument cannot be used where it was given.
struct ArgumentProblem: Error {
    let message: String
}

/// Converts the `Any` arguments of a format to predicate values, checking their types.
enum PredicateArgument {
    /// The argument with any `Optional` layers removed; nil for `nil` and `NSNull`.
    static func unwrap(_ argument: Any) -> Any? {
        let mirror = Mirror(reflecting: argument)
        if mirror.displayStyle == .optional {
            guard let wrapped = mirror.children.first?.value else { return nil }
            return unwrap(wrapped)
        }
        if argument is NSNull { return nil }
        return argument
    }

    /// The argument's type as Swift spells it (`Int`, `Array<String>`), `nil` for nil.
    static func typeName(_ argument: Any) -> String {
        guard let value = unwrap(argument) else { return "nil" }
        return String(describing: type(of: value))
    }

    /// The value of a `%@` argument: a scalar, or a list for an array or set.
    static func value(_ argument: Any) throws(ArgumentProblem) -> PredicateValue {
        guard let value = unwrap(argument) else { throw nilProblem }
        if isBytes(value) { return .scalar(try scalar(value)) }
        if let array = value as? [Any] { return .list(try elements(array)) }
        let mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .set { return .list(try elements(mirror.children.map(\.value))) }
        return .scalar(try scalar(value))
    }

    /// The value of a `%d`-style argument: an integer type, `Bool` (1/0) or an integer
    /// `NSNumber`; nil for anything else.
    static func integer(_ argument: Any) -> Int64? {
        guard let value = unwrap(argument) else { return nil }
        if isNumberObject(value) {
            guard let number = value as? NSNumber, case .int64(let v) = number.cirrusScalar else { return nil }
            return v
        }
        guard case .int64(let v)? = try? scalar(value) else { return nil }
        return v
    }

    /// The value of a `%f`-style argument: `Double`, `Float` or an `NSNumber`; nil otherwise.
    static func floating(_ argument: Any) -> Double? {
        switch unwrap(argument) {
        case let v as Double: v
        case let v as Float: Double(v)
        case let v? where isNumberObject(v): (v as? NSNumber)?.doubleValue
        default: nil
        }
    }

    /// The value of a `%K` argument: a `String`; nil otherwise.
    static func key(_ argument: Any) -> String? {
        switch unwrap(argument) {
        case let v as String: v
        case let v as Substring: String(v)
        default: nil
        }
    }

    private static let nilProblem = ArgumentProblem(
        message: "nil cannot be compared: CloudKit predicates do not support nil")

    /// `Data` or exactly `[UInt8]` (an empty array or an `NSArray` of numbers would also
    /// cast to `[UInt8]`; those are lists).
    private static func isBytes(_ value: Any) -> Bool { value is Data || type(of: value) == [UInt8].self }

    /// An `NSNumber` object (not a Swift number that would bridge to one).
    private static func isNumberObject(_ value: Any) -> Bool { type(of: value) is NSNumber.Type }

    private static func elements(_ values: [Any]) throws(ArgumentProblem) -> [FieldValue] {
        var result: [FieldValue] = []
        result.reserveCapacity(values.count)
        for element in values {
            guard let value = unwrap(element) else { throw nilProblem }
            if !isBytes(value), value is [Any] || Mirror(reflecting: value).displayStyle == .set {
                throw ArgumentProblem(message: "a list cannot hold lists")
            }
            let scalar = try scalar(value)
            if let first = result.first, first.kindDescription != scalar.kindDescription {
                throw ArgumentProblem(
                    message: "a list must hold values of one type; found \(first.kindDescription) and \(scalar.kindDescription)")
            }
            result.append(scalar)
        }
        return result
    }

    /// One non-list value.
    static func scalar(_ value: Any) throws(ArgumentProblem) -> FieldValue {
        if isNumberObject(value), let number = value as? NSNumber { return number.cirrusScalar }
        switch value {
        case let v as String: return .string(v)
        case let v as Substring: return .string(String(v))
        case let v as Bool: return .int64(v ? 1 : 0)
        case let v as Int: return .int64(Int64(v))
        case let v as Int64: return .int64(v)
        case let v as Int32: return .int64(Int64(v))
        case let v as Int16: return .int64(Int64(v))
        case let v as Int8: return .int64(Int64(v))
        case let v as UInt32: return .int64(Int64(v))
        case let v as UInt16: return .int64(Int64(v))
        case let v as UInt8: return .int64(Int64(v))
        case let v as UInt: return .int64(try fitting(v))
        case let v as UInt64: return .int64(try fitting(v))
        case let v as Double: return .double(v)
        case let v as Float: return .double(Double(v))
        case let v as Date: return .date(v)
        case let v as CKRecord.Reference: return .reference(v)
        case let v as CKRecord.ID: return .reference(CKRecord.Reference(recordID: v, action: .none))
        case let v as CKRecord: return .reference(CKRecord.Reference(recordID: v.recordID, action: .none))
        case let v as CKLocation: return .location(v)
        case let v as Data: return .bytes(v)
        case let v as [UInt8] where isBytes(value): return .bytes(Data(v))
        case is CKAsset: throw ArgumentProblem(message: "a CKAsset cannot be compared in a query")
        default:
            throw ArgumentProblem(message: "a value of type \(typeName(value)) cannot be used in a CloudKit predicate")
        }
    }

    private static func fitting<T: BinaryInteger>(_ value: T) throws(ArgumentProblem) -> Int64 {
        guard let fitted = Int64(exactly: value) else {
            throw ArgumentProblem(message: "the \(T.self) value \(value) does not fit in a 64-bit signed integer")
        }
        return fitted
    }
}
