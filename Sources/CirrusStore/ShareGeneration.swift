import GRDB
import Synchronization

/// Counts the commits that changed a share (the `shares` and `share_participants` tables,
/// however they changed: a share saved or deleted, a participant accepting, leaving or
/// removed, a zone deleted), so an access policy compiled from the shares can be kept until
/// the count moves. It is bumped on the writer's queue right after such a commit, before the
/// write that made it returns.
final class ShareGeneration: TransactionObserver, Sendable {
    private let count = Atomic<UInt64>(0)
    /// Whether the transaction under way changed a share; touched only on the writer's queue,
    /// where GRDB calls every method of a transaction observer.
    private let changed = Mutex(false)

    /// The number of commits that changed a share so far (in this process).
    var current: UInt64 { count.load(ordering: .acquiring) }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool {
        eventKind.tableName == "shares" || eventKind.tableName == "share_participants"
    }

    func databaseDidChange(with event: DatabaseEvent) {
        changed.withLock { $0 = true }
    }

    /// Changes SQLite does not report row by row: those of `share_participants`, a `WITHOUT
    /// ROWID` table, which the writes that change it announce (`Database.notifyChanges(in:)`).
    func databaseDidChange() {
        changed.withLock { $0 = true }
    }

    func databaseDidCommit(_ db: Database) {
        if changed.withLock({ value in defer { value = false }; return value }) {
            count.add(1, ordering: .releasing)
        }
    }

    func databaseDidRollback(_ db: Database) {
        // What a rolled-back transaction changed never happened; counting it would be harmless.
        changed.withLock { $0 = false }
    }
}
