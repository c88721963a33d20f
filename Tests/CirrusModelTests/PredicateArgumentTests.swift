import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

@Suite("Predicate arguments: each type becomes its wire value")
struct PredicateArgumentTests {
    /// The value `%@` (or another placeholder) turns `argument` into.
    func value(_ argument: Any, placeholder: String = "%@") throws -> Wire.FieldValue.Kind? {
        let wire = try CKPredicate(parsing: "v == \(placeholder)", argumentArray: [argument]).wirePredicate
        guard case .comparison(let comparison)? = wire.node else { return nil }
        return comparison.value?.kind
    }

    @Test("Strings, integers of every width, Bool as 1/0, Double and Float")
    func scalars() throws {
        #expect(try value("s") == .stringValue("s"))
        #expect(try value(Substring("sub")) == .stringValue("sub"))
        #expect(try value(Int(-3)) == .int64Value(-3))
        #expect(try value(Int8(-8)) == .int64Value(-8))
        #expect(try value(Int16(16)) == .int64Value(16))
        #expect(try value(Int32(32)) == .int64Value(32))
        #expect(try value(Int64.min) == .int64Value(.min))
        #expect(try value(UInt8(8)) == .int64Value(8))
        #expect(try value(UInt16(16)) == .int64Value(16))
        #expect(try value(UInt32.max) == .int64Value(Int64(UInt32.max)))
        #expect(try value(UInt(7)) == .int64Value(7))
        #expect(try value(UInt64(Int64.max)) == .int64Value(.max))
        #expect(try value(true) == .int64Value(1))
        #expect(try value(false) == .int64Value(0))
        #expect(try value(1.5) == .doubleValue(1.5))
        #expect(try value(Float(0.5)) == .doubleValue(0.5))
        #expect(try value(NSNumber(value: 4)) == .int64Value(4))
        #expect(try value(NSNumber(value: 4.25)) == .doubleValue(4.25))
        #expect(try value(Optional<Int>.some(9) as Any) == .int64Value(9))
    }

    @Test("Dates, references, record IDs, records, locations and bytes")
    func objects() throws {
        let date = Date(timeIntervalSince1970: 1_234_567_890.5)
        #expect(try value(date) == .dateValue(date.wireTimestamp))
        let id = CKRecord.ID(recordName: "list-1", zoneID: CKRecordZone.ID(zoneName: "Lists"))
        let reference = CKRecord.Reference(recordID: id, action: .deleteSelf)
        #expect(try value(reference) == .referenceValue(reference.wireReference))
        let plain = CKRecord.Reference(recordID: id, action: .none).wireReference
        #expect(try value(id) == .referenceValue(plain))
        let record = CKRecord(recordType: "List", recordID: id)
        #expect(try value(record) == .referenceValue(plain))
        let location = CKLocation(latitude: 47, longitude: 8)
        #expect(try value(location) == .locationValue(location.wireLocation))
        #expect(try value(Data([1, 2, 3])) == .bytesValue([1, 2, 3]))
        #expect(try value([UInt8]([4, 5])) == .bytesValue([4, 5]))
    }

    @Test("Arrays become the matching typed lists for IN")
    func lists() throws {
        func list(_ argument: Any) throws -> Wire.FieldValue.Kind? {
            let wire = try CKPredicate(parsing: "v IN %@", argumentArray: [argument]).wirePredicate
            guard case .comparison(let comparison)? = wire.node else { return nil }
            return comparison.value?.kind
        }
        #expect(try list(["a", "b"]) == .stringList(Wire.StringList(values: ["a", "b"])))
        #expect(try list([1, 2]) == .int64List(Wire.Int64List(values: [1, 2])))
        #expect(try list([Int8(1), Int8(2)]) == .int64List(Wire.Int64List(values: [1, 2])))
        #expect(try list([true, false]) == .int64List(Wire.Int64List(values: [1, 0])))
        #expect(try list([0.5, 1.5]) == .doubleList(Wire.DoubleList(values: [0.5, 1.5])))
        #expect(try list([Data([1]), Data([2])]) == .bytesList(Wire.BytesList(values: [[1], [2]])))
        #expect(try list([[UInt8]([1]), [UInt8]([2])]) == .bytesList(Wire.BytesList(values: [[1], [2]])))
        let location = CKLocation(latitude: 1, longitude: 2)
        #expect(try list([location]) == .locationList(Wire.LocationList(values: [location.wireLocation])))
        let ids = [CKRecord.ID(recordName: "a"), CKRecord.ID(recordName: "b")]
        #expect(
            try list(ids)
                == .referenceList(
                    Wire.ReferenceList(values: ids.map { CKRecord.Reference(recordID: $0, action: .none).wireReference })))
        #expect(try list([Optional("x"), Optional("y")]) == .stringList(Wire.StringList(values: ["x", "y"])))
        #expect(try list(NSArray(array: [NSNumber(value: 1), NSNumber(value: 2)])) == .int64List(Wire.Int64List(values: [1, 2])))
    }

    @Test("%d takes integers and Bool, %f takes Double, Float and NSNumber")
    func placeholders() throws {
        #expect(try value(5, placeholder: "%d") == .int64Value(5))
        #expect(try value(Int64(5), placeholder: "%lld") == .int64Value(5))
        #expect(try value(UInt(5), placeholder: "%lu") == .int64Value(5))
        #expect(try value(5, placeholder: "%ld") == .int64Value(5))
        #expect(try value(5, placeholder: "%i") == .int64Value(5))
        #expect(try value(5, placeholder: "%u") == .int64Value(5))
        #expect(try value(true, placeholder: "%d") == .int64Value(1))
        #expect(try value(NSNumber(value: 3), placeholder: "%d") == .int64Value(3))
        #expect(try value(2.5, placeholder: "%f") == .doubleValue(2.5))
        #expect(try value(2.5, placeholder: "%lf") == .doubleValue(2.5))
        #expect(try value(Float(2.5), placeholder: "%g") == .doubleValue(2.5))
        #expect(try value(NSNumber(value: 3), placeholder: "%f") == .doubleValue(3))
        #expect(CKPredicate(format: "v == %d", NSNumber(value: 2.5)).parseError?.message == "%d needs an integer, got NSNumber")
    }

    @Test("A string argument is a value, never parsed as format")
    func argumentsAreNotParsed() throws {
        #expect(try value("a' OR b == 'c") == .stringValue("a' OR b == 'c"))
        #expect(try value("%@") == .stringValue("%@"))
    }
}
