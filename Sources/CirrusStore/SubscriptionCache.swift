import GRDB
import Synchronization

/// Compiled subscriptions per database, each kept with the generation of the database's
/// subscriptions it was compiled for. Every engine stores a generation per database that any
/// change to its subscriptions replaces, inside the transaction that changed them, with a value
/// never used before; a write reads it in its own transaction and reuses the compiled set
/// while it matches. A change that rolls back takes its generation with it, and a change made
/// by another process (another node) is seen like one of this process.
package final class SubscriptionSetCache<Key: Hashable & Sendable>: Sendable {
    private struct Entry: Sendable {
        var generation: Int64
        var subscriptions: SubscriptionSet
    }

    /// Databases whose compiled subscriptions are kept; past this the cache starts over.
    package static var capacity: Int { 4_096 }

    private let entries = Mutex<[Key: Entry]>([:])

    package init() {}

    /// The subscriptions compiled for `generation` of `key`'s, if kept.
    package func subscriptions(of key: Key, generation: Int64) -> SubscriptionSet? {
        entries.withLock { entries in
            guard let entry = entries[key], entry.generation == generation else { return nil }
            return entry.subscriptions
        }
    }

    /// Keeps `subscriptions`, compiled for `generation` of `key`'s.
    package func keep(_ subscriptions: SubscriptionSet, of key: Key, generation: Int64) {
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[key] = Entry(generation: generation, subscriptions: subscriptions)
        }
    }
}

/// The SQLite engine's compiled subscriptions per database, reused by every write while the
/// database's `subscriptions_generation` (schema v7) stays the same, so a write to a database
/// with many subscriptions does not decode and compile all of them again.
///
/// Any change to a database's subscriptions sets a new random generation (triggers on
/// `subscriptions`), inside the transaction that changed them: a write in the same
/// transaction sees the new generation and loads the new set; a change that rolls back takes
/// its generation with it, and no later change can draw it again. Used on the writer
/// connection only.
final class SubscriptionCache: Sendable {
    private let sets = SubscriptionSetCache<Int64>()

    /// The subscriptions of database `databaseID`, as the transaction of `db` sees them; its
    /// generation read once per transaction when the write shares `transaction`.
    ///
    /// - throws: ``StoreError`` `.corruptData` when a stored subscription does not decode.
    func subscriptions(
        _ db: Database, databaseID: Int64, transaction: WriteTransactionCache? = nil
    ) throws -> SubscriptionSet {
        let generation =
            try transaction?.subscriptionGeneration(db, databaseID: databaseID)
            ?? Self.generation(db, databaseID: databaseID)
        if let subscriptions = sets.subscriptions(of: databaseID, generation: generation) { return subscriptions }
        let subscriptions = try SubscriptionSet.load(db, databaseID: databaseID)
        sets.keep(subscriptions, of: databaseID, generation: generation)
        return subscriptions
    }

    /// The `subscriptions_generation` of database `databaseID` in the transaction of `db`
    /// (bound through the C API, ``RawStatement``: a write reads it).
    static func generation(_ db: Database, databaseID: Int64) throws -> Int64 {
        try db.int64(sql: "SELECT subscriptions_generation FROM databases WHERE id = ?", integer: databaseID) ?? 0
    }
}
