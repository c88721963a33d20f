import GRDB
import Synchronization

/// Compiled subscriptions per database, reused by every write while the
/// database's `subscriptions_generation` (schema v7) stays the same, so a
/// write to a database with many subscriptions does not decode and compile
/// all of them again.
///
/// Any change to a database's subscriptions sets a new random generation
/// (triggers on `subscriptions`), inside the transaction that changed them:
/// a write in the same transaction sees the new generation and loads the new
/// set; a change that rolls back takes its generation with it, and no later
/// change can draw it again. Used on the writer connection only.
final class SubscriptionCache: Sendable {
    private struct Entry: Sendable {
        var generation: Int64
        var subscriptions: SubscriptionSet
    }

    /// Databases whose compiled subscriptions are kept; past this the cache starts over.
    static let capacity = 4_096

    private let entries = Mutex<[Int64: Entry]>([:])

    /// The subscriptions of database `databaseID`, as the transaction of `db` sees them.
    ///
    /// - throws: ``StoreError`` `.corruptData` when a stored subscription does not decode.
    func subscriptions(_ db: Database, databaseID: Int64) throws -> SubscriptionSet {
        // Read for every write job: bound through the C API (``RawStatement``).
        let read = try RawStatement(db, sql: "SELECT subscriptions_generation FROM databases WHERE id = ?")
        read.bind(1, databaseID)
        let generation = try read.int64() ?? 0
        if let entry = entries.withLock({ $0[databaseID] }), entry.generation == generation {
            return entry.subscriptions
        }
        let subscriptions = try SubscriptionSet.load(db, databaseID: databaseID)
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[databaseID] = Entry(generation: generation, subscriptions: subscriptions)
        }
        return subscriptions
    }
}
