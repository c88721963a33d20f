import CirrusWire
import Foundation
import Testing

@testable import CirrusStore

@Suite("Query operators")
struct QueryOperatorTests {
    @Test func smoke() async throws {
        try await withStore { storage, _ in
            try await storage.saveAll([
                item("a", [("n", .int64Value(1)), ("s", .stringValue("apple"))]),
                item("b", [("n", .int64Value(2)), ("s", .stringValue("banana"))]),
                item("c", [("n", .doubleValue(2.5))]),
            ])
            #expect(try await storage.names(nil) == ["a", "b", "c"])
            #expect(try await storage.names(Q.cmp("n", .equals, .int64Value(2))) == ["b"])
            #expect(try await storage.names(Q.cmp("n", .greater, .int64Value(1))) == ["b", "c"])
            #expect(try await storage.names(Q.cmp("s", .beginsWith, .stringValue("ba"))) == ["b"])
            #expect(try await storage.names(Q.not(Q.cmp("s", .beginsWith, .stringValue("ba")))) == ["a", "c"])
        }
    }
}
