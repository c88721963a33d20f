import CirrusPostgres
import CirrusTestSupport
import CirrusWire
import Foundation
import Synchronization
import Testing

@testable import CirrusStore

let container = "iCloud.com.example.tests"
let alice = DatabaseKey.private(container: container, user: "_alice")
let bob = DatabaseKey.private(container: container, user: "_bob")
let publicDB = DatabaseKey.public(container: container)

/// A fresh directory under the system temporary directory.
func temporaryDirectory() -> String {
    (NSTemporaryDirectory() as NSString).appendingPathComponent("cirrus-store-\(UUID().uuidString)")
}

/// Runs `body` with the path of `file` in a fresh directory, created first and removed after
/// (for tests of SQLite files of their own).
func withTemporaryFile(_ file: String, _ body: (String) throws -> Void) throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    try body((directory as NSString).appendingPathComponent(file))
}

// MARK: - The storage engine under test

/// A storage engine the storage conformance suite runs against.
///
/// **The conformance suite** is every test that reaches the store only through
/// ``withSyncStore(clock:_:)``, ``withStore(clock:_:)``, ``withDirectoryStore(clock:_:)``,
/// ``withJournalStore(clock:_:)``, ``withSubscriptionStore(clock:_:)``,
/// ``withQueryStore(clock:_:)``, ``withShareStore(clock:_:)`` or ``withAssetStore(clock:_:)``
/// (each one shape, ``withStore(_:as:clock:_:)``: the engines with a capability, their storages
/// as the protocol it promises). It is split by capability:
///
/// - **Records, zones and change feeds** (``RecordSyncStorage``, through
///   ``withSyncStore(clock:_:)``): `AccessTests`, `AtomicTests`, `ChangeFeedTests`,
///   `FetchTests`, `SavePolicyTests`, `ZoneTests`, `GroupCommitTests`, but for the tests of
///   theirs that need more. Every engine in ``all`` runs them: SQLite and PostgreSQL.
/// - **Everything** (``RecordStorage``, through ``withStore(clock:_:)``): the rest of those
///   files (but the asset tests, below), `CascadeTests`, `ReferenceRulesTests`, the store part
///   of `ThroughputTests`, and `QueryKeysetTests` `aCursorOutlivesTheStoreThatIssuedIt`. The
///   engines of ``all`` that implement all of ``RecordStorage`` (``isComplete``) run them:
///   SQLite and PostgreSQL.
/// - **Queries** (``RecordQueryStorage``, through ``withQueryStore(clock:_:)``): the rest of
///   `QueryCursorTests`, `QueryKeysetTests` (but the tests named here and below),
///   `QueryOperatorTests`, `QueryRandomizedTests`, `QuerySortTests`, `QueryValidationTests`
///   and `QueryTextAndDistanceTests` — full-text search and distance sorts included. The
///   engines of ``all`` that implement it (``implementsQueries``) run them: SQLite and
///   PostgreSQL. An engine that does not run full-text search and distance sorts
///   (``runsTextSearchAndDistanceSorts`` false; none now) would have `QueryRandomizedTests`
///   expect those queries refused, saying so. `QuerySortTests` `fieldsThatDoNotSortAreRefused`
///   saves assets: it runs on the engines that implement queries and assets.
/// - **Assets** (``AssetReferenceStorage``, and records with asset fields, through
///   ``withAssetStore(clock:_:)``): the asset tests of `FetchTests`
///   (`assetsAreStoredOncePerChecksumAndFetchedWithContent`, `assetContentIsVerified`,
///   `fileContentIsSavedByChecksumAndCountedOnce`, `anAssetWithoutContentMustAlreadyBeStored`,
///   `unreferencedAssetsArePruned`, `contentArrivingWithAnEarlierSaveOfTheRequestIsKnown`,
///   `aCommittedContentIsKeptUntilItsGraceHasPassed`). The engines
///   of ``all`` that implement it (``implementsAssets``) run them: SQLite and PostgreSQL.
///
/// - **The user directory and bearer tokens** (``UserStorage`` and ``TokenStorage``, through
///   ``withDirectoryStore(clock:_:)``): `UserStorageTests`, `TokenStorageTests`. The engines
///   of ``all`` that implement both (``implementsDirectory``) run them: SQLite and PostgreSQL.
/// - **The long-lived operation journal** (``OperationJournal``, through
///   ``withJournalStore(clock:_:)``): `OperationJournalTests` but its test of corrupt stored
///   events, and `OperationJournalLeaseTests` (leases, takeover, fencing). The engines of ``all`` that implement it (``implementsJournal``) run them: SQLite
///   and PostgreSQL.
/// - **Subscriptions and notification feeds** on records and zones (``SubscriptionStorage``,
///   through ``withSubscriptionStore(clock:_:)``): `SubscriptionTests`. The engines of ``all``
///   that implement it (``implementsSubscriptions``) run them: SQLite and PostgreSQL.
/// - **Shares and the shared database** (``ShareStorage`` and shares in record writes, through
///   ``withShareStore(clock:_:)``, or ``withStores(_:as:nodes:_:)`` for several nodes):
///   `ShareSaveTests`, `SharedTombstoneTests` but its migration test, `ShareStorageTests`. The
///   engines of ``all`` that implement it (``implementsShares``) run them: SQLite and
///   PostgreSQL.
///
/// A test moves from the second group to the first once every engine can run it; an engine
/// joins ``all`` by adding its factory there.
///
/// **SQLite-specific** (they open `SQLiteStorage` through ``withSQLiteStore(clock:_:)`` or
/// directly, and test its internals): `MigrationTests`, `CheckpointTests`, `DurabilityTests`
/// (crash safety, SIGKILL), in `GroupCommitTests` the test of SQLite's write queue, in
/// `QueryKeysetTests` `versionsAreKeptOnlyInZonesWithLiveCursors` (SQLite keeps versions only
/// in zones with live cursors; PostgreSQL keeps every one until pruned),
/// `QueryIndexTests` (schema and index introspection, rows examined), the shares generation
/// (`ShareGenerationTests`, `ShareGenerationAcrossOpenersTests`: PostgreSQL keeps none), in
/// `SharedTombstoneTests` the v11 migration test, in
/// `OperationJournalTests` the test of corrupt stored events (it rewrites SQLite's rows), in
/// `QueryKeysetTests` `firstPagesInTheQueryOrderReadAboutAPage` (rows examined, query
/// plan) and `swiftOrdersSortValuesAsSQLiteDoes`, and `ThroughputTests.rawSQLiteBaseline`.
/// `StorageOutcomeTests` uses no storage at all.
struct StorageEngineUnderTest: Sendable, CustomStringConvertible {
    var name: String
    /// A new, unused place for a storage (a directory for SQLite, a database's URL for
    /// PostgreSQL).
    var newLocation: @Sendable () throws -> String
    /// Opens the storage at `location`: empty the first time, the same data when opened
    /// again after ``SyncStorageUnderTest/close()``. Time comes from `clock`.
    var open: @Sendable (_ location: String, _ clock: @escaping @Sendable () -> Wire.Timestamp) async throws
        -> any SyncStorageUnderTest
    /// Removes everything stored at `location`.
    var remove: @Sendable (_ location: String) -> Void
    /// Subscriptions one user may keep in one database (more fail with `limitExceeded`).
    var maximumSubscriptionsPerDatabase: Int
    /// Whether the engine implements all of ``RecordStorage`` (its storages are
    /// ``StorageUnderTest``s), not only ``RecordSyncStorage``.
    var isComplete: Bool
    /// Whether the engine implements ``UserStorage`` and ``TokenStorage`` (its storages are
    /// ``DirectoryStorageUnderTest``s).
    var implementsDirectory: Bool
    /// Whether the engine implements ``OperationJournal`` (its storages are
    /// ``JournalStorageUnderTest``s).
    var implementsJournal: Bool
    /// Whether the engine implements ``SubscriptionStorage`` (its storages are
    /// ``SubscriptionStorageUnderTest``s).
    var implementsSubscriptions: Bool
    /// Whether the engine implements ``RecordQueryStorage`` (its storages are
    /// ``QueryStorageUnderTest``s).
    var implementsQueries: Bool
    /// Whether the engine implements ``ShareStorage`` and keeps shares in its record writes
    /// (its storages are ``ShareStorageUnderTest``s).
    var implementsShares: Bool
    /// Whether the engine implements ``AssetReferenceStorage`` and keeps records with asset
    /// fields (its storages are ``AssetStorageUnderTest``s).
    var implementsAssets: Bool
    /// Whether its queries run full-text search (`self CONTAINS`) and sort by distance; an
    /// engine that does not refuses them with `invalidArguments` naming what it does not run.
    var runsTextSearchAndDistanceSorts: Bool

    var description: String { name }

    /// The embedded default engine.
    static let sqlite = StorageEngineUnderTest(
        name: "SQLite",
        newLocation: temporaryDirectory,
        open: { try SQLiteStorage(directory: $0, clock: $1) },
        remove: { try? FileManager.default.removeItem(atPath: $0) },
        maximumSubscriptionsPerDatabase: SQLiteStorage.maximumSubscriptionsPerDatabase,
        isComplete: true,
        implementsDirectory: true,
        implementsJournal: true,
        implementsSubscriptions: true,
        implementsQueries: true,
        implementsShares: true,
        implementsAssets: true,
        runsTextSearchAndDistanceSorts: true
    )

    /// The engine on a PostgreSQL server: a new database on this test process's server
    /// (``TemporaryPostgres``) per storage. Records, zones, change feeds, the user directory,
    /// bearer tokens, the long-lived operation journal, subscriptions, notification feeds,
    /// queries (full-text search and distance sorts included), shares and assets: everything.
    static let postgres = StorageEngineUnderTest(
        name: "PostgreSQL",
        newLocation: { try TemporaryPostgres.shared().createDatabase() },
        // A generous wait for a pooled connection: a loaded machine runs a hundred tests against
        // the one server at once (the default 10 s failed a randomized query test there).
        open: { try await PostgresStorage(url: PostgresURL($0), maximumConnections: 4, leaseTimeout: .seconds(120), clock: $1) },
        remove: { url in
            guard let name = try? PostgresURL(url).database else { return }
            _ = try? TemporaryPostgres.shared().psql("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        },
        maximumSubscriptionsPerDatabase: SQLiteStorage.maximumSubscriptionsPerDatabase,
        isComplete: true,
        implementsDirectory: true,
        implementsJournal: true,
        implementsSubscriptions: true,
        implementsQueries: true,
        implementsShares: true,
        implementsAssets: true,
        runsTextSearchAndDistanceSorts: true
    )

    /// Every engine the conformance suite runs against.
    static let all: [StorageEngineUnderTest] = [.sqlite, .postgres]
}

/// What the records, zones and change feeds part of the conformance suite needs of an
/// engine besides ``RecordSyncStorage``.
protocol SyncStorageUnderTest: RecordSyncStorage {
    /// How many rows of a kind the engine keeps, by the name of its SQLite table: "records",
    /// "tombstones", "assets" (asset contents), "cascade_references" (deleteSelf references),
    /// "query_preimages" (record versions kept for query cursors), "record_fields" (indexed
    /// field values), "record_text" (records with text for full-text search), "databases".
    /// Another engine counts what it keeps for the same purpose.
    func count(_ table: String) async throws -> Int

    /// Closes the storage; it is not used afterwards.
    func close() async throws
}

/// What the whole conformance suite needs of an engine: all of ``RecordStorage``.
protocol StorageUnderTest: QueryStorageUnderTest, RecordStorage {}

/// What the user directory and bearer token part of the conformance suite needs of an engine.
protocol DirectoryStorageUnderTest: SyncStorageUnderTest, UserStorage, TokenStorage {}

/// What the subscriptions part of the conformance suite needs of an engine.
protocol SubscriptionStorageUnderTest: SyncStorageUnderTest, SubscriptionStorage {}

/// What the queries part of the conformance suite needs of an engine.
protocol QueryStorageUnderTest: SyncStorageUnderTest, RecordQueryStorage {}

extension SQLiteStorage: QueryStorageUnderTest {}
extension PostgresStorage: QueryStorageUnderTest {}

extension SQLiteStorage: DirectoryStorageUnderTest {}
extension PostgresStorage: DirectoryStorageUnderTest {}
extension SQLiteStorage: SubscriptionStorageUnderTest {}
extension PostgresStorage: SubscriptionStorageUnderTest {}

/// What the shares part of the conformance suite needs of an engine: shares, and the users,
/// subscriptions and notification feeds its tests invite, subscribe and notify.
protocol ShareStorageUnderTest: DirectoryStorageUnderTest, SubscriptionStorageUnderTest, ShareStorage {}

extension SQLiteStorage: ShareStorageUnderTest {}
extension PostgresStorage: ShareStorageUnderTest {}

/// What the assets part of the conformance suite needs of an engine.
protocol AssetStorageUnderTest: SyncStorageUnderTest, AssetReferenceStorage {}

extension SQLiteStorage: AssetStorageUnderTest {}
extension PostgresStorage: AssetStorageUnderTest {}
extension PostgresStorage: StorageUnderTest {}

/// What the long-lived operation journal part of the conformance suite needs of an engine.
protocol JournalStorageUnderTest: SyncStorageUnderTest, OperationJournal {}

extension SQLiteStorage: JournalStorageUnderTest {}
extension PostgresStorage: JournalStorageUnderTest {}

extension SQLiteStorage: StorageUnderTest {
    func count(_ table: String) async throws -> Int { try await rowCount(of: table) }
}

extension PostgresStorage: SyncStorageUnderTest {
    /// Its indexed field values and the record versions kept for query cursors are
    /// `record_values` and `query_preimages`, as SQLite's; its asset contents `assets`;
    /// SQLite's full-text table (`record_text`, a row per record with text) is `record_words`
    /// (a row per word).
    private static let keptByNothing: Set<String> = ["record_fields"]

    func count(_ table: String) async throws -> Int {
        if Self.keptByNothing.contains(table) { return 0 }
        // SQLite's full-text table holds a row per record with text; this engine a row per word.
        if table == "record_text" { return try await recordsWithWords() }
        return try await rowCount(of: table)
    }
}

/// The clock storages under test read unless a test sets its own.
let systemClock: @Sendable () -> Wire.Timestamp = SQLiteStorage.systemClock

/// Runs `body` once per engine of ``StorageEngineUnderTest/all`` (each implements
/// ``RecordSyncStorage``), each time with a fresh storage of that engine, closed and removed
/// afterwards. `clock` is evaluated once per engine: `withSyncStore(clock: SteppingClock().clock)`
/// gives each engine a clock of its own, starting over.
func withSyncStore(
    clock: @autoclosure () -> @Sendable () -> Wire.Timestamp = systemClock,
    _ body: (any SyncStorageUnderTest, StorageEngineUnderTest) async throws -> Void
) async throws {
    for engine in StorageEngineUnderTest.all {
        try await withStorage(of: engine, clock: clock()) { try await body($0, engine) }
    }
}

/// Runs `body` once per engine of ``StorageEngineUnderTest/all`` that implements all of
/// ``RecordStorage`` (``StorageEngineUnderTest/isComplete``), each time with a fresh storage of
/// that engine, closed and removed afterwards.
func withStore(
    clock: @autoclosure () -> @Sendable () -> Wire.Timestamp = systemClock,
    _ body: (any StorageUnderTest, StorageEngineUnderTest) async throws -> Void
) async throws {
    try await withStore(\.isComplete, as: (any StorageUnderTest).self, clock: clock(), body)
}

/// Runs `body` once per engine of ``StorageEngineUnderTest/all`` that implements ``UserStorage``
/// and ``TokenStorage`` (``StorageEngineUnderTest/implementsDirectory``), each time with a
/// fresh storage of that engine, closed and removed afterwards.
func withDirectoryStore(
    clock: @autoclosure () -> @Sendable () -> Wire.Timestamp = systemClock,
    _ body: (any DirectoryStorageUnderTest, StorageEngineUnderTest) async throws -> Void
) async throws {
    try await withStore(\.implementsDirectory, as: (any DirectoryStorageUnderTest).self, clock: clock(), body)
}

/// Runs `body` once per engine of ``StorageEngineUnderTest/all`` that implements
/// ``OperationJournal`` (``StorageEngineUnderTest/implementsJournal``), each time with a fresh
/// storage of that engine, closed and removed afterwards.
func withJournalStore(
    clock: @autoclosure () -> @Sendable () -> Wire.Timestamp = systemClock,
    _ body: (any JournalStorageUnderTest, StorageEngineUnderTest) async throws -> Void
) async throws {
    try await withStore(\.implementsJournal, as: (any JournalStorageUnderTest).self, clock: clock(), body)
}

/// Runs `body` once per engine of ``StorageEngineUnderTest/all`` that implements
/// ``RecordQueryStorage`` (``StorageEngineUnderTest/implementsQueries``), each time with a fresh
/// storage of that engine, closed and removed afterwards.
func withQueryStore(
    clock: @autoclosure () -> @Sendable () -> Wire.Timestamp = systemClock,
    _ body: (any QueryStorageUnderTest, StorageEngineUnderTest) async throws -> Void
) async throws {
    try await withStore(\.implementsQueries, as: (any QueryStorageUnderTest).self, clock: clock(), body)
}

/// Runs `body` once per engine of ``StorageEngineUnderTest/all`` that implements
/// ``AssetReferenceStorage`` (``StorageEngineUnderTest/implementsAssets``), each time with a fresh
/// storage of that engine, closed and removed afterwards.
func withAssetStore(
    clock: @autoclosure () -> @Sendable () -> Wire.Timestamp = systemClock,
    _ body: (any AssetStorageUnderTest, StorageEngineUnderTest) async throws -> Void
) async throws {
    try await withStore(\.implementsAssets, as: (any AssetStorageUnderTest).self, clock: clock(), body)
}

/// Runs `body` once per engine of ``StorageEngineUnderTest/all`` that implements
/// ``SubscriptionStorage`` (``StorageEngineUnderTest/implementsSubscriptions``), each time with a
/// fresh storage of that engine, closed and removed afterwards.
func withSubscriptionStore(
    clock: @autoclosure () -> @Sendable () -> Wire.Timestamp = systemClock,
    _ body: (any SubscriptionStorageUnderTest, StorageEngineUnderTest) async throws -> Void
) async throws {
    try await withStore(\.implementsSubscriptions, as: (any SubscriptionStorageUnderTest).self, clock: clock(), body)
}

/// Runs `body` once per engine of ``StorageEngineUnderTest/all`` that implements ``ShareStorage``
/// (``StorageEngineUnderTest/implementsShares``), each time with a fresh storage of that engine,
/// closed and removed afterwards.
func withShareStore(
    clock: @autoclosure () -> @Sendable () -> Wire.Timestamp = systemClock,
    _ body: (any ShareStorageUnderTest, StorageEngineUnderTest) async throws -> Void
) async throws {
    try await withStore(\.implementsShares, as: (any ShareStorageUnderTest).self, clock: clock(), body)
}

/// Runs `body` once per engine of ``StorageEngineUnderTest/all`` that has `capability`, each
/// time with a fresh storage of that engine as a `Storage` (the protocol of what the
/// capability promises), closed and removed afterwards: the shape of every `with…Store`.
func withStore<Storage>(
    _ capability: KeyPath<StorageEngineUnderTest, Bool>, as _: Storage.Type,
    clock: @autoclosure () -> @Sendable () -> Wire.Timestamp = systemClock,
    _ body: (Storage, StorageEngineUnderTest) async throws -> Void
) async throws {
    for engine in StorageEngineUnderTest.all where engine[keyPath: capability] {
        try await withStorage(of: engine, clock: clock()) { storage in
            let capable = try #require(storage as? Storage, "\(engine) implements \(Storage.self)")
            try await body(capable, engine)
        }
    }
}

/// Like ``withStore(_:as:clock:_:)``, but `body` gets `nodes` storages of each engine open on
/// the same data at once (several `cirrusd` nodes sharing one database, or several processes on
/// one SQLite file).
func withStores<Storage>(
    _ capability: KeyPath<StorageEngineUnderTest, Bool>, as _: Storage.Type, nodes: Int,
    _ body: ([Storage], StorageEngineUnderTest) async throws -> Void
) async throws {
    for engine in StorageEngineUnderTest.all where engine[keyPath: capability] {
        let location = try engine.newLocation()
        defer { engine.remove(location) }
        var opened: [any SyncStorageUnderTest] = []
        do {
            for _ in 0..<nodes { opened.append(try await engine.open(location, systemClock)) }
            let storages = try opened.map { try #require($0 as? Storage, "\(engine) implements \(Storage.self)") }
            try await body(storages, engine)
        } catch {
            for storage in opened { try? await storage.close() }
            throw error
        }
        for storage in opened { try await storage.close() }
    }
}

/// Like ``withDirectoryStore(clock:_:)``, but `body` gets `nodes` storages of each engine open
/// on the same data at once (several `cirrusd` nodes sharing one database, or several
/// processes on one SQLite file).
func withDirectoryStores(
    nodes: Int, _ body: ([any DirectoryStorageUnderTest], StorageEngineUnderTest) async throws -> Void
) async throws {
    try await withStores(\.implementsDirectory, as: (any DirectoryStorageUnderTest).self, nodes: nodes, body)
}

/// Opens a fresh storage of `engine`, runs `body` with it, then closes and removes it (also
/// when `body` throws).
private func withStorage(
    of engine: StorageEngineUnderTest, clock: @escaping @Sendable () -> Wire.Timestamp,
    _ body: (any SyncStorageUnderTest) async throws -> Void
) async throws {
    let location = try engine.newLocation()
    defer { engine.remove(location) }
    let storage = try await engine.open(location, clock)
    do {
        try await body(storage)
    } catch {
        try? await storage.close()
        throw error
    }
    try await storage.close()
}

/// Runs `body` with a `SQLiteStorage` in a fresh temporary directory, removed afterwards
/// (for the SQLite-specific tests).
func withSQLiteStore(
    clock: @escaping @Sendable () -> Wire.Timestamp = systemClock,
    walLimitBytes: Int = SQLiteStorage.defaultWALLimitBytes,
    _ body: (SQLiteStorage, String) async throws -> Void
) async throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let storage = try SQLiteStorage(directory: directory, walLimitBytes: walLimitBytes, clock: clock)
    try await body(storage, directory)
    try storage.close()
}

func zoneID(_ name: String, in key: DatabaseKey = alice) -> Wire.RecordZoneID {
    Wire.RecordZoneID(zoneName: name, ownerName: key.owner)
}

func recordID(_ name: String, zone: String = "_defaultZone", in key: DatabaseKey = alice) -> Wire.RecordID {
    Wire.RecordID(recordName: name, zoneID: zoneID(zone, in: key))
}

func field(_ key: String, _ kind: Wire.FieldValue.Kind?) -> Wire.RecordField {
    Wire.RecordField(key: key, value: kind.map { Wire.FieldValue(kind: $0) })
}

func note(
    _ name: String, zone: String = "_defaultZone", in key: DatabaseKey = alice, tag: String = "",
    _ fields: [Wire.RecordField] = []
) -> Wire.Record {
    Wire.Record(recordID: recordID(name, zone: zone, in: key), recordType: "Note", recordChangeTag: tag, fields: fields)
}

func reference(_ target: Wire.RecordID, deleteSelf: Bool = true) -> Wire.FieldValue.Kind {
    .referenceValue(Wire.Reference(recordID: target, action: deleteSelf ? .deleteSelf : .none))
}

extension Wire.Record {
    func value(_ key: String) -> Wire.FieldValue.Kind? {
        fields.first { $0.key == key }?.value?.kind
    }
    var keys: Set<String> { Set(fields.map(\.key)) }
}

extension RecordModificationResult {
    func saved(_ index: Int) -> Wire.Record? {
        saves.indices.contains(index) ? saves[index].value : nil
    }
    func saveError(_ index: Int) -> ItemFailure? {
        saves.indices.contains(index) ? saves[index].failure : nil
    }
}

extension ItemOutcome where Value == Wire.Record {
    var record: Wire.Record? { value }
}

extension ItemOutcome where Value == Wire.RecordZone {
    var zone: Wire.RecordZone? { value }
}

extension ItemOutcome where Value == Wire.Subscription {
    var subscription: Wire.Subscription? { value }
}

extension RecordSyncStorage {
    /// Saves records with the default policy and expects every one to succeed.
    @discardableResult
    func saveAll(_ records: [Wire.Record], in key: DatabaseKey = alice, by user: String = "_alice") async throws -> [Wire.Record] {
        let result = try await modifyRecords(RecordModification(saving: records), in: key, by: user)
        return try result.saves.indices.map { try #require(result.saved($0), "save \($0): \(result.saves[$0])") }
    }

    func createZone(_ name: String, in key: DatabaseKey = alice) async throws {
        let result = try await modifyZones(saving: [Wire.RecordZone(zoneID: zoneID(name, in: key))], deleting: [], in: key)
        #expect(result.saves.first?.zone != nil)
    }

    func fetch(_ id: Wire.RecordID, desiredKeys: [String]? = nil, in key: DatabaseKey = alice) async throws -> RecordFetchOutcome {
        try #require(try await fetchRecords([id], desiredKeys: desiredKeys, in: key).first)
    }
}

extension SQLiteStorage {
    /// Alice's zone `zone`, created and shared whole with `users` (each created with alice and
    /// invited read-write); the token of the share's URL, for them to accept it.
    func zoneShared(_ zone: String = "Trip", with users: [String]) async throws -> String {
        for user in ["_alice"] + users { _ = try await createUser(user, at: Wire.Timestamp(seconds: 1)) }
        try await createZone(zone)
        let participants = users.map { user in
            Wire.ShareParticipant(
                userIdentity: Wire.UserIdentity(userRecordID: Wire.RecordID(recordName: user)), role: .privateUser,
                permission: .readWrite)
        }
        let saved = try await saveAll([
            Wire.Record(
                recordID: recordID(ShareRules.zoneShareName, zone: zone), recordType: ShareRules.shareType,
                shareFields: Wire.ShareFields(participants: participants))
        ])
        return try #require(ShareURL.token(in: "https://h" + (saved.first?.shareFields?.url ?? "")))
    }
}

/// A clock that advances one second per call, starting at `start`.
final class SteppingClock: Sendable {
    private let next: Mutex<Int64>
    init(start: Int64 = 1_700_000_000) { next = Mutex(start) }
    var clock: @Sendable () -> Wire.Timestamp {
        { [self] in next.withLock { value in defer { value += 1 }; return Wire.Timestamp(seconds: value, nanos: 0) } }
    }
}
