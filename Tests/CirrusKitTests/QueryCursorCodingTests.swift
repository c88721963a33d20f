import CirrusKit
import Foundation
import Testing

/// `CKQueryOperation.Cursor` archives as Apple's does (`NSSecureCoding`) and stays `Codable`.
@Suite("Query cursor: NSSecureCoding and Codable")
struct QueryCursorCodingTests {
    @Test func roundTripsThroughAKeyedArchiveUnderSecureCoding() throws {
        #expect(CKQueryOperation.Cursor.supportsSecureCoding)
        let cursor = CKQueryOperation.Cursor(data: Data([0, 1, 2, 255]))
        let data = try NSKeyedArchiver.archivedData(withRootObject: cursor, requiringSecureCoding: true)
        let back = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: CKQueryOperation.Cursor.self, from: data))
        #expect(back == cursor)
        #expect(back.data == Data([0, 1, 2, 255]))
        #expect(back.hash == cursor.hash)
        #expect(Set([cursor, back]).count == 1)
    }

    @Test func codableKeepsItsShape() throws {
        let cursor = CKQueryOperation.Cursor(data: Data([7, 8]))
        let json = try JSONEncoder().encode(cursor)
        #expect(String(decoding: json, as: UTF8.self) == #"{"data":"Bwg="}"#)
        #expect(try JSONDecoder().decode(CKQueryOperation.Cursor.self, from: json) == cursor)
        #expect(cursor != CKQueryOperation.Cursor(data: Data([7])))
    }
}
