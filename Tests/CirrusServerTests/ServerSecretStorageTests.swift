import CirrusPostgres
import CirrusServer
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Testing

/// The server secret of several nodes, kept in the PostgreSQL database they share.
@Suite("ServerSecret in a shared database")
struct ServerSecretStorageTests {
    @Test func nodesOnOneDatabaseSealWithOneSecretAndAWrongOneIsRefused() async throws {
        let server = try TemporaryPostgres.shared()
        let url = try PostgresURL(server.createDatabase())
        defer { _ = try? server.psql("DROP DATABASE IF EXISTS \(url.database) WITH (FORCE)") }
        let first = try await PostgresStorage(url: url, maximumConnections: 2)
        let second: PostgresStorage
        do {
            second = try await PostgresStorage(url: url, maximumConnections: 2)
        } catch {
            await first.close()
            throw error
        }
        do {
            async let one = ServerSecret.load(from: first)
            async let two = ServerSecret.load(from: second)
            let secrets = try await [one, two]
            #expect(secrets[0].count == 32)
            #expect(secrets[0] == secrets[1], "both nodes hold the secret the first stored")

            // A token node 1 seals opens on node 2.
            let database = DatabaseKey.private(container: "iCloud.com.example.tests", user: "_alice")
            let token = ChangeTokenSealer(secret: secrets[0]).seal(.database, in: database, incarnation: 0, seq: 7, floor: 0)
            #expect(try ChangeTokenSealer(secret: secrets[1]).open(token, .database, in: database).seq == 7)

            _ = try server.psql("UPDATE server_secret SET secret = '\\x010203'", database: url.database)
            await #expect(throws: ServerSecret.Failure.self) { _ = try await ServerSecret.load(from: second) }
        } catch {
            await first.close()
            await second.close()
            throw error
        }
        await first.close()
        await second.close()
    }
}
