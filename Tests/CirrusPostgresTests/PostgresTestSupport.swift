import CirrusPostgres
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Logging

let container = "iCloud.com.example.tests"
let alice = DatabaseKey.private(container: container, user: "_alice")
let bob = DatabaseKey.private(container: container, user: "_bob")
let publicDB = DatabaseKey.public(container: container)

func zoneID(_ name: String, in key: DatabaseKey = alice) -> Wire.RecordZoneID {
    Wire.RecordZoneID(zoneName: name, ownerName: key.owner)
}

/// A new empty database on this test process's PostgreSQL server, with its URL.
func newDatabase() throws -> PostgresURL {
    try PostgresURL(TemporaryPostgres.shared().createDatabase())
}

/// Runs `body` with a `PostgresStorage` on `url` (a new, empty database unless given);
/// closes it afterwards.
func withPostgresStore(_ url: PostgresURL? = nil, _ body: (PostgresStorage) async throws -> Void) async throws {
    let storage = try await PostgresStorage(url: url ?? newDatabase(), maximumConnections: 4)
    do {
        try await body(storage)
    } catch {
        await storage.close()
        throw error
    }
    await storage.close()
}
