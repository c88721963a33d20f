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

/// The lines of `psql`'s output. (Written out: `split(separator:).map(String.init)` compared with
/// another mapped array took the type checker 10–12 s per expression.)
func lines(of output: String) -> [String] {
    output.split(separator: "\n").map { (line: Substring) -> String in String(line) }
}

/// Every schema version of this build, as `psql` prints `cirrus_schema`'s rows.
func allSchemaVersions() -> [String] {
    (1...PostgresStorage.schemaVersion).map { (version: Int) -> String in String(version) }
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
