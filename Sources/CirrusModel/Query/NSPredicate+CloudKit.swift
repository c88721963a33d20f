import Foundation

#if !canImport(Darwin)
extension NSPredicate {
    /// A predicate from a format string in CloudKit's predicate language, for `CKQuery` and
    /// `CKQuerySubscription` (CloudKit code's `NSPredicate(format:…)`, which
    /// swift-corelibs-foundation does not have). It carries a ``CKPredicate``; see that type for
    /// the grammar. It never throws: an invalid format fails the operation that uses it with
    /// `CKError(.invalidArguments)`.
    ///
    /// For example:
    /// ```swift
    /// let predicate = NSPredicate(format: "category == %@ AND createdAt > %@", "work", oneWeekAgo)
    /// let query = CKQuery(recordType: "Note", predicate: predicate)
    /// ```
    public convenience init(format predicateFormat: String, _ arguments: Any...) {
        self.init(format: predicateFormat, argumentArray: arguments)
    }

    /// A predicate from a format string and an array of arguments; see `init(format:_:)`.
    public convenience init(format predicateFormat: String, argumentArray arguments: [Any]?) {
        let predicate = CKPredicate(format: predicateFormat, argumentArray: arguments)
        // Foundation on Linux keeps no format, only a block: the block hands the CloudKit
        // predicate to a probe (CKPredicate.init(_:)) and matches no ordinary object, since
        // such a predicate means something only to a server.
        self.init { object, _ in
            (object as? PredicateProbe)?.found.withLock { $0 = predicate }
            return false
        }
    }
}

/// What `CKPredicate.init(_:)` evaluates an `NSPredicate` with, to read the CloudKit predicate
/// that `NSPredicate(format:)` put in it.
final class PredicateProbe: Sendable {
    let found = Locked<CKPredicate?>(nil)
}
#endif

extension CKPredicate {
    /// The CloudKit predicate of an `NSPredicate`: the one `NSPredicate(format:…)` parsed, or
    /// `TRUEPREDICATE` / `FALSEPREDICATE` for `NSPredicate(value:)`.
    ///
    /// On Linux, Foundation's predicates are blocks: one not made by `NSPredicate(format:…)`
    /// is evaluated once against a placeholder object and read as `NSPredicate(value:)` of the
    /// result, so a predicate made with `NSPredicate(block:)` is not sent as written (CloudKit
    /// refuses those too).
    public init(_ predicate: NSPredicate) {
        #if canImport(Darwin)
        self.init(format: predicate.predicateFormat)
        #else
        let probe = PredicateProbe()
        let matches = predicate.evaluate(with: probe)
        self = probe.found.withLock { $0 } ?? CKPredicate(value: matches)
        #endif
    }
}

extension CKQuery {
    /// A query for records of `recordType` that match `predicate` (CloudKit's
    /// `CKQuery(recordType:predicate:)` with an `NSPredicate`).
    ///
    /// For example:
    /// ```swift
    /// let query = CKQuery(recordType: "Note", predicate: NSPredicate(value: true))
    /// ```
    public convenience init(recordType: CKRecord.RecordType, predicate: NSPredicate) {
        self.init(recordType: recordType, predicate: CKPredicate(predicate))
    }
}

extension CKQuerySubscription {
    /// A query subscription with an ID of your choice and an `NSPredicate` (CloudKit's form).
    ///
    /// For example:
    /// ```swift
    /// let subscription = CKQuerySubscription(
    ///     recordType: "Task", predicate: NSPredicate(format: "priority > %d", 5),
    ///     subscriptionID: "high-priority-tasks", options: [.firesOnRecordCreation])
    /// ```
    public convenience init(
        recordType: CKRecord.RecordType, predicate: NSPredicate, subscriptionID: CKSubscription.ID, options: Options = []
    ) {
        self.init(recordType: recordType, predicate: CKPredicate(predicate), subscriptionID: subscriptionID, options: options)
    }

    /// A query subscription with a new unique ID and an `NSPredicate`.
    public convenience init(recordType: CKRecord.RecordType, predicate: NSPredicate, options: Options = []) {
        self.init(recordType: recordType, predicate: CKPredicate(predicate), options: options)
    }
}
