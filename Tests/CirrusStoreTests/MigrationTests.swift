import CirrusWire
import Foundation
import GRDB
import Testing

@testable import CirrusStore

/// A data directory written by an older schema opens, migrated, with nothing lost.
@Suite("Schema migration")
struct MigrationTests {
    /// Tests/Fixtures/store-v4: written by schema v4 (commit 052c750) in the
    /// private database of `_alice`: zone Notes with records parent (title,
    /// count), child (a deleteSelf reference to parent), kept (an accented
    /// title) and gone (deleted: a tombstone), and a zone subscription "all-notes".
    private static let fixture: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(2)  // MigrationTests.swift, CirrusStoreTests
        return parts.joined(separator: "/") + "/Fixtures/store-v4"
    }()

    /// A copy of the fixture in a fresh directory (opening migrates it in place).
    private func copyOfFixture() throws -> String {
        let directory = temporaryDirectory()
        try FileManager.default.copyItem(atPath: Self.fixture, toPath: directory)
        return directory
    }

    /// A fresh data directory (the caller removes it) whose store stops at schema `migration`,
    /// holding what `fill` wrote there as that schema's code did.
    private func storeDirectory(
        at migration: String, _ fill: @escaping @Sendable (Database) throws -> Void
    ) async throws -> String {
        let directory = temporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let queue = try DatabaseQueue(path: (directory as NSString).appendingPathComponent(SQLiteStorage.fileName))
        try SQLiteStorage.migrator.migrate(queue, upTo: migration)
        try await queue.write(fill)
        return directory
    }

    @Test func v4DataDirectoryIsMigratedOnFirstOpen() async throws {
        let directory = try copyOfFixture()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }

        let (migrations, triggers) = try await storage.read { db in
            (try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations"),
             try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'trigger'"))
        }
        #expect(migrations.contains("v4-subscriptions") && migrations.contains("v5-write-path"))
        #expect(!triggers.contains("records_supersede_tombstones"))

        // The records as v4 stored them.
        let parent = try await storage.fetch(recordID("parent", zone: "Notes"))
        #expect(parent.record?.value("title") == .stringValue("Groceries"))
        #expect(parent.record?.value("count") == .int64Value(3))
        #expect(try await storage.fetch(recordID("gone", zone: "Notes")).failure?.code == .unknownItem)

        // The change feed, the query index and full text written by v4.
        let feed = try await storage.recordChanges(in: zoneID("Notes"), of: alice, since: 0, limit: 100, desiredKeys: nil)
        #expect(Set(feed.changed.compactMap { $0.recordID?.recordName }) == ["parent", "child", "kept"])
        #expect(feed.deleted.map(\.recordID.recordName) == ["gone"])
        #expect(try await storage.names(Q.text("creme"), zone: "Notes") == ["kept"])
        #expect(try await storage.names(Q.cmp("count", .equals, .int64Value(3)), zone: "Notes") == ["parent"])
        let subscriptions = try await storage.fetchSubscriptions(nil, in: alice, of: "_alice")
        #expect(subscriptions.count == 1)

        // Saving a deleted record's name again supersedes its tombstone (a
        // trigger did this up to v4; the writer does it now).
        try await storage.saveAll([note("gone", zone: "Notes", [field("title", .stringValue("Back again"))])])
        let after = try await storage.recordChanges(in: zoneID("Notes"), of: alice, since: 0, limit: 100, desiredKeys: nil)
        #expect(after.deleted.isEmpty)
        #expect(after.changed.contains { $0.recordID?.recordName == "gone" })

        // deleteSelf references written by v4 still cascade.
        let deletion = try await storage.modifyRecords(
            RecordModification(deleting: [recordID("parent", zone: "Notes")]), in: alice, by: "_alice")
        #expect(deletion.cascadedDeletions.map(\.recordName) == ["child"])

        // A zone and type with records before v16 goes on indexing every field and its text
        // without a query naming them (``FieldIndexing``).
        let (values, text) = (try await storage.count("record_values"), try await storage.count("record_text"))
        try await storage.saveAll([
            note("fresh", zone: "Notes", [field("title", .stringValue("Fresh words")), field("unqueried", .int64Value(9))])
        ])
        #expect(try await storage.count("record_values") == values + 2)
        #expect(try await storage.count("record_text") == text + 1)
    }

    @Test func v9FindsNotificationsKeptBeforeItByID() async throws {
        // A store at v8 with one notification in alice's feed, as v8 wrote it (no ID column).
        let body = Data(Wire.PushNotification(notificationID: "kept-before-v9").serializedBytes())
        let directory = try await storeDirectory(at: "v8-users") { db in
            try db.execute(
                sql: """
                    INSERT INTO notification_feeds (container, owner, head_seq) VALUES ('c', '_alice', 1);
                    INSERT INTO notifications (container, owner, seq, scope, created_ns, body)
                    VALUES ('c', '_alice', 1, 1, 0, ?);
                    """,
                arguments: [body])
        }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }
        let feed = NotificationFeedKey(container: "c", user: "_alice")
        #expect(try await storage.markNotificationsRead(["kept-before-v9", "other"], in: feed) == [true, false])
        #expect(try await storage.markNotificationsRead(["kept-before-v9"], in: NotificationFeedKey(container: "c", user: "_bob")) == [false])
        let batch = try await storage.notificationChanges(for: feed, after: nil, limit: 10)
        #expect(batch.notifications.map(\.notification.isRead) == [true])
    }

    /// v12 builds the full-text table again without per-row token counts: text written by
    /// v11 is still found, new saves are indexed, a deleted record's text goes with it.
    @Test func v12KeepsFullTextWrittenBeforeIt() async throws {
        // A store at v11 holding one record and its full-text row, as v11 wrote them.
        var record = note("kept", [field("title", .stringValue("Crème brûlée"))])
        record.recordChangeTag = "1-1"
        let data = Data(record.serializedBytes())
        let directory = try await storeDirectory(at: "v11-shared-tombstones") { db in
            try db.execute(
                sql: """
                    INSERT INTO databases (id, container, scope, owner, change_seq) VALUES (1, ?, ?, ?, 1);
                    INSERT INTO zones (id, database_id, name, change_seq, db_seq) VALUES (1, 1, '_defaultZone', 1, 1);
                    INSERT INTO records (id, zone_id, name, record_type, change_tag, change_seq, creator, data)
                    VALUES (7, 1, 'kept', 'Note', '1-1', 1, '_alice', ?);
                    INSERT INTO record_text (rowid, body) VALUES (7, 'Crème brûlée');
                    """,
                arguments: [alice.container, alice.scope.rawValue, alice.owner, data])
        }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }
        let tables = try await storage.read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE name LIKE 'record_text%'")
        }
        #expect(tables.contains("record_text") && !tables.contains("record_text_docsize"))
        #expect(!tables.contains("record_text_v12"))
        #expect(try await storage.names(Q.text("creme")) == ["kept"])

        try await storage.saveAll([note("new", [field("title", .stringValue("crème fraîche"))])])
        #expect(try await storage.names(Q.text("creme")).sorted() == ["kept", "new"])
        _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("kept")]), in: alice, by: "_alice")
        #expect(try await storage.names(Q.text("creme")) == ["new"])
        let rows = try await storage.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM record_text") }
        #expect(rows == 1)
    }

    /// v17 indexes the record's dates and creator only where a query needs them: records
    /// written before stay in those indexes (now partial), their zone and type is marked so its
    /// saves go on so, and a type new to the zone leaves them out until a query asks.
    @Test func v17KeepsTheDatesAndCreatorOfRecordsWrittenBeforeItIndexed() async throws {
        // A store at v16 holding one record, as v16 wrote it (every index of `records` whole).
        var record = note("kept", [field("title", .stringValue("Old"))])
        record.recordChangeTag = "1-1"
        record.creationDate = Wire.Timestamp(seconds: 77, nanos: 0)
        record.modificationDate = Wire.Timestamp(seconds: 88, nanos: 0)
        let data = Data(record.serializedBytes())
        let directory = try await storeDirectory(at: "v16-indexed-fields") { db in
            try db.execute(
                sql: """
                    INSERT INTO databases (id, container, scope, owner, change_seq) VALUES (1, ?, ?, ?, 1);
                    INSERT INTO zones (id, database_id, name, change_seq, db_seq) VALUES (1, 1, '_defaultZone', 1, 1);
                    INSERT INTO records (id, zone_id, name, record_type, change_tag, change_seq, creator, data,
                        created_ns, modified_ns, modifier)
                    VALUES (7, 1, 'kept', 'Note', '1-1', 1, '_alice', ?, 77000000000, 88000000000, '_alice');
                    """,
                arguments: [alice.container, alice.scope.rawValue, alice.owner, data])
        }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }
        func state() async throws -> (indexed: [String: Int], markers: [String]) {
            try await storage.read { db in
                let rows = try Row.fetchAll(db, sql: "SELECT name, sys_indexed FROM records")
                let markers = try String.fetchAll(
                    db, sql: "SELECT record_type || ' ' || key FROM indexed_fields WHERE built_through IS NULL ORDER BY 1")
                return (Dictionary(uniqueKeysWithValues: rows.map { ($0[0] as String, $0[1] as Int) }), markers)
            }
        }
        #expect(try await state().indexed == ["kept": 1])
        #expect(try await state().markers == ["Note \(FieldIndexing.system)"])

        // Its queries read the partial indexes at once; its saves go on filling them.
        #expect(try await storage.names(Q.cmp("creationDate", .equals, Q.date(77))) == ["kept"])
        let plan = try await storage.queryPlan(
            for: Q.query(nil, sorts: [Q.sort("modificationDate")]), in: zoneID("_defaultZone"), of: alice)
        #expect(plan.contains { $0.contains("records_by_modified") }, "\(plan)")
        try await storage.saveAll([note("new", [field("title", .stringValue("New"))])])
        // A type the zone never had: out of them until a query asks.
        var task = note("task", [field("title", .stringValue("Do"))])
        task.recordType = "Task"
        try await storage.saveAll([task])
        #expect(try await state().indexed == ["kept": 1, "new": 1, "task": 0])
        #expect(try await storage.names(Q.cmp("creationDate", .greater, Q.date(78)), type: "Task") == ["task"])
        #expect(try await state().indexed["task"] == 1)
        #expect(try await state().markers == ["Note \(FieldIndexing.system)", "Task \(FieldIndexing.system)"])
    }

    /// v13 keeps the shares generation in the database: a v12 store gets the row and the
    /// triggers, its shares stay as they were, and from then on every change of a share (and
    /// only that) moves the row, whichever connection makes it.
    @Test func v13KeepsTheSharesGenerationInTheDatabase() async throws {
        // A store at v12 with a zone shared whole and one accepted participant, as v12 wrote them.
        let directory = try await storeDirectory(at: "v12-text-without-sizes") { db in
            try db.execute(
                sql: """
                    INSERT INTO databases (id, container, scope, owner, change_seq) VALUES (1, ?, ?, '_alice', 1);
                    INSERT INTO zones (id, database_id, name, change_seq, db_seq) VALUES (1, 1, 'Trip', 1, 1);
                    INSERT INTO shares (id, zone_id, name, root_name, token, public_permission)
                        VALUES (1, 1, 'cloudkit.zoneshare', NULL, 't1', 1);
                    INSERT INTO share_participants (share_id, participant_id, user, role, permission, status)
                        VALUES (1, 'p1', '_bob', 3, 3, 2);
                    """,
                arguments: [container, Wire.DatabaseScope.private.rawValue])
        }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = (directory as NSString).appendingPathComponent(SQLiteStorage.fileName)
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }
        #expect(storage.sharesGeneration == 0, "the migration starts the generation, moving nothing")
        #expect(try await storage.acceptedShares(of: "_bob", in: container).map(\.zoneName) == ["Trip"])

        // Another connection on the file (no store at all) changes a participant: the row moves.
        let other = try DatabaseQueue(path: path)
        try await other.write { db in
            try db.execute(sql: "UPDATE share_participants SET status = 3 WHERE share_id = 1 AND participant_id = 'p1'")
        }
        #expect(storage.sharesGeneration == 1)
        try await other.write { db in try db.execute(sql: "UPDATE zones SET change_seq = 2 WHERE id = 1") }
        #expect(storage.sharesGeneration == 1, "a change of no share")
        try await other.write { db in try db.execute(sql: "DELETE FROM shares WHERE id = 1") }
        #expect(storage.sharesGeneration.map { $0 >= 2 } == true, "the share and (cascading) its participant deleted")
        try other.close()
        #expect(try await storage.acceptedShares(of: "_bob", in: container).isEmpty)
    }

    /// v14 adds leases on running long-lived operations: the operations of a v13 store are
    /// unheld (any node may take them over and continue them), their journals as they were.
    @Test func v14LeavesTheRunningOperationsOfAnOlderStoreUnheld() async throws {
        let open = Wire.Open(operationID: "old", databaseScope: .private, containerIdentifier: container)
        let directory = try await storeDirectory(at: "v13-share-generation") { db in
            try db.execute(
                sql: """
                    INSERT INTO long_lived_operations (owner, operation_id, container, open, created_ns, last_seq)
                    VALUES ('_alice', 'old', ?, ?, 5, 0)
                    """,
                arguments: [container, Data(open.serializedBytes())])
        }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }
        let key = LongLivedOperationKey(owner: "_alice", operationID: "old")
        #expect(try await storage.longLivedOperation(key)?.lease == nil)
        let now = Wire.Timestamp(seconds: 10)
        #expect(try await storage.unheldLongLivedOperations(at: now, limit: 10) == [key])
        let lease = LongLivedLease(node: "a", expiry: Wire.Timestamp(seconds: 20))
        #expect(try await storage.takeOverLongLivedOperation(key, lease: lease, at: now)?.open == open)
        #expect(try await storage.appendLongLivedEvents([], to: key, checkpoint: [1], by: "a").isEmpty)
        #expect(try await storage.unheldLongLivedOperations(at: now, limit: 10).isEmpty)
    }

    /// v15 adds the cancellation mark of long-lived operations: the running operations of a v14
    /// store are not cancelled, and may be.
    @Test func v15LeavesTheRunningOperationsOfAnOlderStoreUncancelled() async throws {
        let open = Wire.Open(operationID: "old", databaseScope: .private, containerIdentifier: container)
        let directory = try await storeDirectory(at: "v14-long-lived-leases") { db in
            try db.execute(
                sql: """
                    INSERT INTO long_lived_operations
                        (owner, operation_id, container, open, created_ns, last_seq, lease_node, lease_expiry_ns)
                    VALUES ('_alice', 'old', ?, ?, 5, 0, 'a', 10)
                    """,
                arguments: [container, Data(open.serializedBytes())])
        }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }
        let key = LongLivedOperationKey(owner: "_alice", operationID: "old")
        #expect(try await storage.longLivedOperation(key)?.cancelRequested == false)
        #expect(try await storage.longLivedCancellationsRequested(among: [key]).isEmpty)
        #expect(try await storage.requestLongLivedCancellation(key))
        #expect(try await storage.longLivedCancellationsRequested(among: [key]) == [key])
    }
}
