import CirrusWire
import Foundation
import GRDB

extension SQLiteStorage {
    /// Schema v9: notifications can be marked read (CKMarkNotificationsReadOperation).
    ///
    /// - `notifications.notification_id`: the ID inside `body`, copied out so a user's
    ///   notification is found by ID (`notifications_by_id`); filled in for the notifications
    ///   already kept (one whose body does not decode keeps NULL and cannot be marked).
    /// - `notifications.is_read`: 1 once its user marked it read; fetched notifications say so
    ///   (`PushNotification.is_read`).
    static func migrateToV9(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE notifications ADD COLUMN notification_id TEXT;
            ALTER TABLE notifications ADD COLUMN is_read INTEGER NOT NULL DEFAULT 0;
            """)
        let rows = try Row.fetchAll(db, sql: "SELECT container, owner, seq, body FROM notifications")
        for row in rows {
            let body: Data = row["body"]
            guard let notification = try? Wire.PushNotification(serializedBytes: [UInt8](body)) else { continue }
            try db.execute(
                sql: "UPDATE notifications SET notification_id = ? WHERE container = ? AND owner = ? AND seq = ?",
                arguments: [notification.notificationID, row["container"], row["owner"], row["seq"]])
        }
        try db.execute(sql: "CREATE INDEX notifications_by_id ON notifications(container, owner, notification_id)")
    }
}
