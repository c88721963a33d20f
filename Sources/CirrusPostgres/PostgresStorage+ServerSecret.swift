public import CirrusStore
import Foundation
import PostgresNIO

extension PostgresStorage: ServerSecretStorage {
    /// The server secret every node on this database shares, created once by the first node
    /// to ask: it offers a new secret with `INSERT … ON CONFLICT DO NOTHING`, then reads the
    /// one stored, so nodes starting together all end with the bytes of the one that won.
    ///
    /// - throws: ``StoreError`` `.storageFailure`.
    public func loadOrCreateServerSecret() async throws -> [UInt8] {
        let offered = Data(ServerSecretRules.random())
        let logger = self.logger
        return try await connection { connection in
            // Two statements outside a transaction: the read sees what another node committed
            // while this node's insert waited on its row.
            try await connection.query(
                "INSERT INTO server_secret (id, secret) VALUES (1, \(offered)) ON CONFLICT DO NOTHING", logger: logger)
            let rows = try await connection.query("SELECT secret FROM server_secret WHERE id = 1", logger: logger)
            for try await secret in rows.decode(Data.self) { return [UInt8](secret) }
            throw StoreError(.storageFailure, "PostgreSQL: the server secret is missing after it was stored")
        }
    }
}
