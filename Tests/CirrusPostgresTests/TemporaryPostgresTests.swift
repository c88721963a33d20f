import CirrusTestSupport
import Foundation
import Testing

@Suite("TemporaryPostgres")
struct TemporaryPostgresTests {
    @Test func aDatabasePerTestOnOneServer() throws {
        let server = try TemporaryPostgres.shared()
        #expect(try TemporaryPostgres.shared() === server)
        let first = try server.createDatabase()
        let second = try server.createDatabase()
        #expect(first != second)
        let name = try #require(second.split(separator: "/").last.map(String.init))
        try server.psql("CREATE TABLE t (x integer); INSERT INTO t VALUES (42)", database: name)
        #expect(try server.psql("SELECT x FROM t", database: name).trimmingCharacters(in: .whitespacesAndNewlines) == "42")
        #expect(second.hasPrefix("postgres://\(TemporaryPostgres.user):\(TemporaryPostgres.password)@127.0.0.1:\(server.port)/"))
    }

    @Test func aClusterOfAProcessThatIsGoneIsRemovedByTheNextRun() throws {
        // A cluster whose test process died without stopping it: its owner.pid names a
        // process that does not exist (pid_max is below 2^22), its server still runs.
        let orphan = try TemporaryPostgres()
        try "4194304\n".write(toFile: orphan.directory + "/owner.pid", atomically: false, encoding: .utf8)
        #expect(FileManager.default.fileExists(atPath: orphan.directory + "/data/postmaster.pid"))
        let next = try TemporaryPostgres()
        defer { next.stop() }
        #expect(!FileManager.default.fileExists(atPath: orphan.directory))
        // Its server is gone too: nothing answers on its socket.
        #expect(throws: TemporaryPostgres.Failure.self) { try orphan.psql("SELECT 1") }
    }
}
