import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

/// CloudKit code's `NSPredicate(format:)` and `NSSortDescriptor(key:ascending:)` compile
/// unchanged and mean what they mean to CloudKit.
@Suite("Queries written with NSPredicate and NSSortDescriptor")
struct FoundationQueryTests {
    @Test("The seed's query: NSPredicate(format:) and NSSortDescriptor(key:ascending:)")
    func seedQuery() throws {
        let oneWeekAgo = Date(timeIntervalSince1970: 1_700_000_000)
        let predicate = NSPredicate(format: "category == %@ AND createdAt > %@", "work", oneWeekAgo)
        let query = CKQuery(recordType: "Note", predicate: predicate)
        query.sortDescriptors = [NSSortDescriptor(key: "createdAt", ascending: false)]
        let expected = CKPredicate(format: "category == %@ AND createdAt > %@", "work", oneWeekAgo)
        #expect(query.predicate == expected)
        let wire = try query.wireQuery
        #expect(wire.predicate == (try expected.wirePredicate))
        #expect(wire.sortDescriptors == [Wire.QuerySortDescriptor(key: "createdAt", ascending: false)])
        #expect(query.sortDescriptors?.first?.recordFieldKey == "createdAt")
        #expect(query.sortDescriptors?.first?.ascending == false)
        #expect(query.sortDescriptors == [CKSortDescriptor(key: "createdAt", ascending: false)])
    }

    @Test("NSPredicate(value:) is TRUEPREDICATE or FALSEPREDICATE")
    func valuePredicates() throws {
        #expect(CKQuery(recordType: "Note", predicate: NSPredicate(value: true)).predicate == CKPredicate(value: true))
        #expect(CKPredicate(NSPredicate(value: false)) == CKPredicate(value: false))
    }

    @Test("An invalid NSPredicate format fails the query with invalidArguments, naming the problem")
    func invalidFormat() {
        let query = CKQuery(recordType: "Note", predicate: NSPredicate(format: "a == 1 OR b == 2"))
        #expect(query.predicate.parseError?.message == "OR is not supported by CloudKit")
        do {
            _ = try query.wireQuery
            Issue.record("an OR predicate was accepted")
        } catch {
            #expect(error.code == .invalidArguments)
        }
    }

    @Test("A format predicate matches no local object: it means something only to a server")
    func formatPredicatesDoNotEvaluateLocally() {
        #expect(!NSPredicate(format: "TRUEPREDICATE").evaluate(with: "anything"))
        #expect(CKPredicate(NSPredicate(format: "TRUEPREDICATE")) == CKPredicate(value: true))
    }

    @Test("A query subscription takes an NSPredicate")
    func subscription() {
        let subscription = CKQuerySubscription(
            recordType: "Task", predicate: NSPredicate(format: "priority > %d", 5), subscriptionID: "high-priority-tasks",
            options: [.firesOnRecordCreation, .firesOnRecordUpdate])
        #expect(subscription.predicate == CKPredicate(format: "priority > %d", 5))
        #expect(subscription.subscriptionID == "high-priority-tasks")
    }

    @Test("A sort descriptor made from a Swift key path names no field and is refused")
    func keyPathSortIsRefused() {
        let query = CKQuery(recordType: "Note", predicate: NSPredicate(value: true))
        query.sortDescriptors = [NSSortDescriptor(keyPath: \Wrapper.title, ascending: true)]
        #expect(query.sortDescriptors?.first?.recordFieldKey == nil)
        do {
            _ = try query.wireQuery
            Issue.record("a key-path sort descriptor was accepted")
        } catch {
            #expect(error.code == .invalidArguments)
            #expect(error.message?.contains("no field key") == true)
        }
    }

    @Test("Sort descriptors archive under secure coding, location sorts included")
    func sortDescriptorsArchive() throws {
        let plain = CKSortDescriptor(key: "rating", ascending: false)
        let near = CKLocationSortDescriptor(key: "location", relativeLocation: CKLocation(latitude: 47.4, longitude: 8.5))
        for descriptor in [plain, near] {
            let data = try NSKeyedArchiver.archivedData(withRootObject: descriptor, requiringSecureCoding: true)
            let back = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: CKSortDescriptor.self, from: data))
            #expect(back == descriptor)
            #expect(type(of: back) == type(of: descriptor))
        }
        #expect((near.reversedSortDescriptor as? CKLocationSortDescriptor)?.ascending == false)
    }

    private struct Wrapper { var title: String }
}
